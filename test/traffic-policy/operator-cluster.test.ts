/**
 * An operator's policy made through one node's admin API reaches a live
 * tunnel on another node within 5 s (that node reads the policies' marks
 * every 2 s), and its deletion too; a user deleted takes their policies
 * with them everywhere.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import type { TestServer } from "../harness/server.ts";
import { curl } from "./curl.ts";

const SECRET = "operator-policy-secret-0123456789abcdef";
let cluster: TwoNodes | undefined;
let nodes: TestServer[] = [];
let api: AdminClient;
let agent: TestAgent | undefined;
let userId: number;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("service") });

beforeAll(async () => {
  cluster = await startTwoNodes({ ids: ["o1", "o2"], secret: SECRET });
  nodes = cluster.nodes;
  api = await signedIn(nodes[0]!);
  userId = await api.createUser("clustered", { skip_warning: true });
  const token = await api.createToken(userId);
  // the tunnel is on the node whose API is not used
  agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "far"] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await cluster?.stop();
  upstream.stop(true);
});

async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < Math.ceil(ms / 100) + 1; i++) {
    if (await check()) return performance.now() - start;
    await Bun.sleep(100);
  }
  throw new Error(`not within ${ms} ms`);
}

test("made on one node, run within 5 s by the tunnel's node, for visitors of either node; deleted, and a user's with their user", async () => {
  const status = (n: TestServer) => curl(`http://far.localhost:${n.edgePort}/`).then((r) => r.status);
  expect(await status(nodes[1]!)).toBe(200);
  const made = await api.post("/api/policies", { name: "cluster-wide", policy: "on_http_request: [{actions: [{type: deny, config: {status_code: 451}}]}]" });
  expect(made.status).toBe(201);
  await within(5_000, async () => (await status(nodes[1]!)) === 451);
  expect(await status(nodes[0]!)).toBe(451);
  await api.delete(`/api/policies/${made.body.id}`);
  await within(5_000, async () => (await status(nodes[1]!)) === 200);
  const theirs = await api.post("/api/policies", { name: "theirs", scope: "user", user_id: userId, policy: "on_http_request: [{actions: [{type: deny, config: {status_code: 451}}]}]" });
  expect(theirs.status).toBe(201);
  await within(5_000, async () => (await status(nodes[1]!)) === 451);
  // the user goes, their tunnel is closed and their policies deleted with them
  expect((await api.delete(`/api/users/${userId}`)).status).toBe(200);
  expect((await api.get(`/api/policies/${theirs.body.id}`)).status).toBe(404);
}, 30_000);
