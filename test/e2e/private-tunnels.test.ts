/**
 * Private tcp tunnels and `burrow connect`, with the real server and agents:
 * the owner's tunnel opens no public port; a user it is shared with reaches
 * the service through a local port; a user it is not shared with is refused
 * exactly as for a name that does not exist; a connector waits while the
 * owner is away; unsharing and revoking close the connector; the active
 * list shows the shares and who is connected.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { echoThrough, startConnector } from "../harness/connector.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let admin: AdminClient;
const tokens: Record<string, string> = {};
const userIds: Record<string, number> = {};
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const children: ReturnType<typeof Bun.spawn>[] = [];

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  for (const name of ["alice", "bob", "carol"]) {
    userIds[name] = await admin.createUser(name);
    tokens[name] = await admin.createToken(userIds[name]!, `${name}-laptop`);
  }
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  echo.stop(true);
  await server?.stop();
});

/** `burrow connect` as `who`, listening on any free port. */
function connector(who: string, target: string, args?: string[]) {
  const c = startConnector({ server: server.edgeUrl, token: tokens[who]!, target, ...(args ? { args } : {}) });
  children.push(c.proc);
  return c;
}

function owner(share: string[]): Promise<TestAgent> {
  return startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "db", ...(share.length ? ["--share", share.join(",")] : [])] });
}

describe("a private tcp tunnel", () => {
  test("opens no public port; a user it is shared with reaches the service through burrow connect", async () => {
    await using agent = await owner(["bob"]);
    expect(agent.publicUrl).toBe("alice/db");
    await agent.output.waitFor(/not public; reach it with  burrow connect alice\/db .*shared with bob/, 5_000);
    const bob = connector("bob", "alice/db");
    const port = await bob.port();
    expect(await echoThrough(port, "hello through a private tunnel")).toBe("hello through a private tunnel");
    const active = (await admin.get("/api/tunnels/active")).body;
    const mine = active.find((t: any) => t.private?.target === "alice/db");
    expect(mine).toMatchObject({ protocol: "tcp", username: "alice", private: { target: "alice/db", shares: ["bob"], connected: 1 } });
    expect(mine.port).toBeUndefined();
    // the owner always reaches their own
    const self = connector("alice", "alice/db");
    expect(await echoThrough(await self.port(), "mine")).toBe("mine");
    const audit = (await admin.get("/api/audit?action=private.connect")).body;
    expect(audit.find((e: any) => e.username === "bob")).toMatchObject({ outcome: "ok", target: "private:alice/db" });
    bob.proc.kill("SIGINT");
    self.proc.kill("SIGINT");
    expect(await bob.proc.exited).toBe(0);
  }, 60_000);

  test("a user it is not shared with is refused as for a name that does not exist (NOT_SHARED), and exits 1", async () => {
    await using _agent = await owner(["bob"]);
    const answers: string[] = [];
    for (const target of ["alice/db", "alice/nothing", "nobody/db"]) {
      const carol = connector("carol", target);
      expect(await carol.proc.exited).toBe(1);
      await carol.output.closed();
      const line = carol.output.lines.find((l) => l.includes("NOT_SHARED"));
      expect(line).toBeDefined();
      answers.push(line!.replace(target, "<target>"));
    }
    expect(new Set(answers).size).toBe(1);
  }, 60_000);

  test("a connector waits while the owner is away, and connects when it comes back", async () => {
    const bob = connector("bob", "alice/db");
    await bob.output.waitFor(/alice\/db is offline: waiting for it to come back/, 15_000);
    await using _agent = await owner(["bob"]);
    const port = await bob.port();
    expect(await echoThrough(port, "back again")).toBe("back again");
    bob.proc.kill("SIGINT");
    await bob.proc.exited;
  }, 60_000);

  test("unsharing closes the connector at once (NOT_SHARED); revoking the connector's token closes it too", async () => {
    const first = await owner(["bob"]);
    const bob = connector("bob", "alice/db");
    await bob.port();
    await first.stop();
    await waitUntil(async () => !(await admin.get("/api/tunnels/active")).body.some((t: any) => t.private?.target === "alice/db"), 5_000, "the first owner's tunnel gone");
    const again = await owner([]);
    expect(await bob.proc.exited).toBe(1);
    expect(bob.output.text()).toContain("NOT_SHARED");
    await again.stop();
    await waitUntil(async () => !(await admin.get("/api/tunnels/active")).body.some((t: any) => t.private?.target === "alice/db"), 5_000, "the second owner's tunnel gone");

    await using _shared = await owner(["carol"]);
    const carolToken = await admin.createToken(userIds.carol!, "carol-second");
    const carolProc = Bun.spawn([...burrowCommand(), "connect", "alice/db", "--server", server.edgeUrl, "--token", carolToken, "--port", "0"], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent" } });
    children.push(carolProc);
    const carolOut = new LineReader(carolProc);
    await carolOut.waitFor(/Connected to alice\/db/, 15_000);
    const tokenId = (await admin.get(`/api/users/${userIds.carol}/tokens`)).body.find((t: any) => t.device_name === "carol-second").id;
    expect((await admin.delete(`/api/tokens/${tokenId}`)).status).toBe(200);
    expect(await carolProc.exited).toBe(1);
    expect(carolOut.text()).toContain("TOKEN_DISABLED");
  }, 60_000);

  test("an unknown username in --share refuses the tunnel, naming it; a user without can_share may not share", async () => {
    const refusedAgent = Bun.spawn([...burrowCommand(), "tcp", String(echo.port), "--private", "--name", "db2", "--share", "bob,ghost,phantom", "--server", server.edgeUrl, "--token", tokens.alice!], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent" } });
    children.push(refusedAgent);
    const out = new LineReader(refusedAgent);
    expect(await refusedAgent.exited).toBe(1);
    await out.closed();
    expect(out.text()).toContain("SHARE_UNKNOWN_USER");
    expect(out.text()).toContain("ghost, phantom");
    expect((await admin.put(`/api/users/${userIds.alice}`, { can_share: false })).body.can_share).toBe(false);
    const denied = Bun.spawn([...burrowCommand(), "tcp", String(echo.port), "--private", "--name", "db3", "--share", "bob", "--server", server.edgeUrl, "--token", tokens.alice!], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent" } });
    children.push(denied);
    const deniedOut = new LineReader(denied);
    expect(await denied.exited).toBe(1);
    await deniedOut.closed();
    expect(deniedOut.text()).toContain("SHARE_DENIED");
    await admin.put(`/api/users/${userIds.alice}`, { can_share: true });
  }, 60_000);
});
