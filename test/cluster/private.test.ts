/**
 * Private tunnels over two nodes on one PostgreSQL: the owner's agent on one
 * node, the connector on the other, the relay link carrying each connection
 * (tcp, and http with X-Burrow-User). The owner's node asks the rules
 * again; the owner leaving closes the connector elsewhere (it waits and
 * comes back with the owner), and sharing anew without it closes it
 * (NOT_SHARED). The name is one owner's over the cluster.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent } from "../harness/agent.ts";
import { echoThrough, startConnector, type TestConnector } from "../harness/connector.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import type { TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

const SECRET = "private-relay-secret-for-tests-0123456789";
let cluster: TwoNodes | undefined;
let nodes: TestServer[] = [];
let admin: AdminClient;
const tokens: Record<string, string> = {};
const connectors: TestConnector[] = [];
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => Response.json({ user: req.headers.get("x-burrow-user"), path: new URL(req.url).pathname }) });

beforeAll(async () => {
  cluster = await startTwoNodes({ ids: ["p1", "p2"], secret: SECRET });
  nodes = cluster.nodes;
  admin = await signedIn(nodes[0]!);
  for (const name of ["alice", "bob", "carol"]) tokens[name] = await admin.createToken(await admin.createUser(name), `${name}-laptop`);
}, 90_000);

afterAll(async () => {
  for (const c of connectors) await c[Symbol.asyncDispose]();
  await cluster?.stop();
  echo.stop(true);
  service.stop(true);
});

function connector(who: string, target: string, node: TestServer): TestConnector {
  const c = startConnector({ server: node.edgeUrl, token: tokens[who]!, target });
  connectors.push(c);
  return c;
}

describe("a private tunnel on one node, its connector on another", () => {
  test("tcp: the connection goes through the relay; the owner leaving closes the connector, which comes back with the owner", async () => {
    const owner = await startAgent({ kind: "tcp", target: echo.port, server: nodes[0]!.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "db", "--share", "bob"] });
    const bob = connector("bob", "alice/db", nodes[1]!);
    const port = await bob.port();
    expect(await echoThrough(port, "across two nodes")).toBe("across two nodes");
    // the admin API of the connector's node lists the tunnel of the other node as private
    const listed = (await (await signedIn(nodes[1]!)).get("/api/tunnels/active")).body.find((t: any) => t.private?.target === "alice/db");
    expect(listed).toMatchObject({ protocol: "tcp", private: { shares: ["bob"], connected: 1 } });
    // the name is alice's one live private tunnel over the cluster
    const taken = await refusal({ kind: "tcp", target: echo.port, server: nodes[1]!.edgeUrl, token: await admin.createToken((await admin.get("/api/users")).body.find((u: any) => u.username === "alice").id, "alice-other"), args: ["--private", "--name", "db"] });
    expect(taken).toContain("PRIVATE_NAME_TAKEN");
    await owner.stop();
    await bob.output.waitFor(/alice\/db is offline: waiting for it to come back/, 15_000);
    await using _back = await startAgent({ kind: "tcp", target: echo.port, server: nodes[0]!.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "db", "--share", "bob"] });
    await waitUntil(async () => (await echoThrough(port, "again").catch(() => "")) === "again", 20_000, "bob through again once alice is back");
  }, 90_000);

  test("http: the service sees the connector's username; sharing anew without the connector closes it (NOT_SHARED)", async () => {
    const owner = await startAgent({ kind: "http", target: service.port!, server: nodes[1]!.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "app", "--share", "carol"] });
    const carol = connector("carol", "alice/app", nodes[0]!);
    const port = await carol.port();
    const res = await fetch(`http://127.0.0.1:${port}/relayed`, { headers: { "X-Burrow-User": "alice" } });
    expect(await res.json()).toEqual({ user: "carol", path: "/relayed" });
    await owner.stop();
    await carol.output.waitFor(/alice\/app is offline/, 15_000);
    await using _again = await startAgent({ kind: "http", target: service.port!, server: nodes[1]!.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "app", "--share", "bob"] });
    expect(await carol.proc.exited).toBe(1);
    expect(carol.output.text()).toContain("NOT_SHARED");
  }, 90_000);
});
