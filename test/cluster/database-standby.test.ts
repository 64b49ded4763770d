/**
 * A node whose PostgreSQL comes back as a read-only hot standby (a primary
 * that returned as a replica after a failover): /readyz says `database` so
 * that a balancer takes the node out, the log says why, the node's own
 * tunnel goes on serving, what needs a write is a 503 to try again (an
 * admin's sign-in, an agent's handshake: the agent waits and comes back),
 * and once the database takes writes again the node is ready again by
 * itself. A real PostgreSQL in standby mode.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type AgentStart, type TestAgent } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";

let pg: TestPostgres;
let node: TestServer;
let agent: TestAgent;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("served") });

let reads: AdminClient;
let newToken = "";
const agentOptions = (token: string, name: string): AgentStart => ({ kind: "http", target: upstream.port!, server: node.edgeUrl, token, args: ["--subdomain", name, "--skip-warning"] });

beforeAll(async () => {
  pg = await startPostgres();
  node = await startServer({ args: ["--database", await pg.newDatabase(), "--node-id", "on-standby"] });
  reads = await signedIn(node);
  const token = await reads.createToken(await reads.createUser("standing", { skip_warning: true }));
  newToken = await reads.createToken(await reads.createUser("newcomer", { skip_warning: true }));
  agent = await startAgent(agentOptions(token, "standing"));
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await node?.stop();
  upstream.stop(true);
  await pg?.stop();
});

/** /readyz's status and body once it is `status` (polled every 250 ms, 15 s at most), or its last answer. */
async function readyzOnce(status: number): Promise<{ status: number; body: unknown }> {
  let last = { status: 0, body: undefined as unknown };
  for (let i = 0; i < 60; i++) {
    const res = await fetch(`${node.adminUrl}/readyz`);
    last = { status: res.status, body: await res.json() };
    if (last.status === status) break;
    await Bun.sleep(250);
  }
  return last;
}

test("standby: not ready (database) with the reason in the log, the tunnel still served, writes 503; a primary again: ready, and the waiting agent in", async () => {
  expect((await readyzOnce(200)).status).toBe(200);
  const linesBefore = node.output.lines.length;
  await pg.restart({ standby: true });
  const notReady = await readyzOnce(503);
  expect(notReady).toEqual({ status: 503, body: { status: "not ready", not_ready: ["database"] } });
  // the first reason may be the restart itself (no connection); once it answers, the log says standby
  const saysStandby = () => node.output.lines.slice(linesBefore).some((l) => l.includes("not ready") && l.includes("read-only standby"));
  for (let i = 0; i < 40 && !saysStandby(); i++) {
    await fetch(`${node.adminUrl}/readyz`).then((r) => r.arrayBuffer());
    await Bun.sleep(250);
  }
  expect(saysStandby()).toBe(true);
  const own = await tunnelFetch(node.edgePort, "standing", "/");
  expect(own.status).toBe(200);
  expect(await own.text()).toBe("served");
  // what needs a write is refused for now, saying so: a 503 to try again, not a 500 and a stack trace
  const login = await fetch(`${node.adminUrl}/api/auth/login`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }) });
  expect(login.status).toBe(503);
  expect(login.headers.get("retry-after")).toBe("5");
  expect(await login.json()).toEqual({ error: "the database is unavailable: try again in a few seconds" });
  expect(await reads.get("/api/users").then((r) => r.status)).toBe(200); // a standby answers reads
  // a new agent is told to come back later, and waits rather than exits
  const newcomer = await startAgent({ ...agentOptions(newToken, "newcomer"), waitFor: /DATABASE_UNAVAILABLE/ });
  await pg.restart();
  const again = await readyzOnce(200);
  expect(again.status).toBe(200);
  // and it takes writes again; the waiting agent is in
  const api = await signedIn(node);
  expect(await api.createUser("after-failback")).toBeGreaterThan(0);
  try {
    await newcomer.output.waitFor(/Forwarding/, 15_000);
    expect(newcomer.proc.exitCode).toBeNull();
    expect((await tunnelFetch(node.edgePort, "newcomer", "/")).status).toBe(200);
  } finally {
    await newcomer.stop();
  }
  const logged = node.output.lines.slice(linesBefore);
  expect(logged.filter((l) => /\berror\b/.test(l) && !l.includes("DATABASE_UNAVAILABLE"))).toEqual([]);
  expect(logged.filter((l) => l.includes("database unavailable")).length).toBeGreaterThanOrEqual(1);
}, 60_000);
