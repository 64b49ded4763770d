/**
 * A node whose PostgreSQL goes away: the tunnels it holds go on serving
 * their visitors, a name it does not hold is a 502 (not a 500), an admin
 * request is a 503 to try again, /readyz says the database is not ready,
 * and the log says so now and then, not every second.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let pg: TestPostgres;
let node: TestServer;
let agent: TestAgent;
let api: AdminClient;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("still here") });

beforeAll(async () => {
  pg = await startPostgres();
  node = await startServer({ args: ["--database", await pg.newDatabase(), "--node-id", "lonely"] });
  api = await signedIn(node);
  const token = await api.createToken(await api.createUser("stays", { skip_warning: true }));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: node.edgeUrl, token, args: ["--subdomain", "stays", "--skip-warning"] });
});
afterAll(async () => {
  await agent?.stop();
  await node?.stop();
  upstream.stop(true);
  await pg?.stop();
});

test("PostgreSQL stopped: the node's own tunnel is served, another name is 502, /readyz says database, and the log stays quiet", async () => {
  expect((await tunnelFetch(node.edgePort, "stays", "/")).status).toBe(200);
  const linesBefore = node.output.lines.length;
  await pg.stop();
  const stopped = performance.now();
  // a few heartbeats and lookups fail meanwhile
  for (let i = 0; i < 6; i++) {
    const own = await tunnelFetch(node.edgePort, "stays", `/${i}`);
    expect(own.status).toBe(200);
    expect(await own.text()).toBe("still here");
    const other = await tunnelFetch(node.edgePort, `nowhere-${i}`, "/");
    expect(other.status).toBe(502);
    await other.arrayBuffer();
    await Bun.sleep(500);
  }
  // an admin request cannot be answered now: it says so, and when to try again
  const users = await api.get("/api/users");
  expect(users.status).toBe(503);
  expect(users.body).toEqual({ error: "the database is unavailable: try again in a few seconds" });
  const ready = await fetch(`${node.adminUrl}/readyz`);
  expect(ready.status).toBe(503);
  expect(await ready.json()).toMatchObject({ not_ready: ["database"] });
  const logged = node.output.lines.slice(linesBefore);
  const heartbeats = logged.filter((l) => l.includes("cluster heartbeat failed"));
  expect(heartbeats.length).toBeGreaterThanOrEqual(1);
  expect(heartbeats.length).toBeLessThanOrEqual(Math.ceil((performance.now() - stopped) / 10_000) + 1);
  expect(logged.filter((l) => l.includes("cluster lookup failed")).length).toBeLessThanOrEqual(2);
  expect(logged.filter((l) => /edge request failed|\b500\b|\berror\b/.test(l))).toEqual([]);
}, 30_000);
