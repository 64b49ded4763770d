/**
 * IP rules skipped on an entry path: a private tcp tunnel keeps its IP
 * rules (docs/private.md), and its only visitors are connectors, so the
 * rules must judge each connector's stream by the address the connector's
 * agent comes from, as they judge a public port's visitors. Before the
 * edge's one judgement, a connector's stream went from its share straight
 * to the owner's agent, and `--allow-cidr` on a private tunnel (or the
 * owner's allow_cidrs set by an admin) let any address through.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { echoThrough, startConnector } from "../harness/connector.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let admin: AdminClient;
const tokens: Record<string, string> = {};
const userIds: Record<string, number> = {};
let reached = 0;
const echo = Bun.listen({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open: () => void reached++,
    data: (s, d) => void s.write(d),
  },
});
const children: ReturnType<typeof Bun.spawn>[] = [];

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  for (const name of ["alice", "bob"]) {
    userIds[name] = await admin.createUser(name);
    tokens[name] = await admin.createToken(userIds[name]!, `${name}-laptop`);
  }
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  echo.stop(true);
  await server?.stop();
});

function owner(rules: string[]): Promise<TestAgent> {
  return startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "db", "--share", "bob", ...rules] });
}

async function bobThrough(): Promise<string> {
  const bob = startConnector({ server: server.edgeUrl, token: tokens.bob!, target: "alice/db" });
  children.push(bob.proc);
  try {
    // refused: the connector's local connection is reset or closed with nothing through it
    return await echoThrough(await bob.port(), "hello").catch(() => "");
  } finally {
    bob.proc.kill("SIGKILL");
  }
}

describe("IP rules skipped on an entry path: a private tunnel's connectors", () => {
  test("a connector from an address outside the tunnel's --allow-cidr gets nothing through, and the service sees no connection", async () => {
    await using _agent = await owner(["--allow-cidr", "10.0.0.0/8"]);
    const before = reached;
    expect(await bobThrough()).toBe("");
    expect(reached).toBe(before);
  }, 60_000);

  test("a connector from an address inside it gets through", async () => {
    await using _agent = await owner(["--allow-cidr", "127.0.0.0/8", "--allow-cidr", "::1/128"]);
    expect(await bobThrough()).toBe("hello");
  }, 60_000);

  test("the owner's allow_cidrs, set by an admin, judge connectors too, from the next stream on", async () => {
    await using _agent = await owner([]);
    expect(await bobThrough()).toBe("hello");
    const patched = await admin.call("PUT", `/api/users/${userIds.alice}`, { allow_cidrs: ["10.0.0.0/8"] });
    expect(patched.status).toBe(200);
    try {
      const before = reached;
      let got = "hello";
      // the change reaches live tunnels within the 5 s promise: asked again until it has (bounded)
      for (let i = 0; i < 50 && got !== ""; i++) {
        got = await bobThrough();
        if (got !== "") await Bun.sleep(200);
      }
      expect(got).toBe("");
      expect(reached).toBeGreaterThanOrEqual(before);
    } finally {
      await admin.call("PUT", `/api/users/${userIds.alice}`, { allow_cidrs: [] });
    }
  }, 90_000);
});
