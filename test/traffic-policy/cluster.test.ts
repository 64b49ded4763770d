/**
 * Traffic policies on two nodes of one PostgreSQL database: a request that
 * comes in on the node without the tunnel's agent is relayed, and the
 * tunnel's node reads its body for verify-webhook there (where its rules
 * live) and sends the agent the same bytes. And an operator's rate limit
 * over tunnels on both nodes counts once for the cluster: each node tells
 * the others its counts every --policy-rate-limit-sync ms.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { curl } from "./curl.ts";
import { policyFile } from "./rig.ts";
import { githubSignature, oneByteChanged } from "./webhook-signers.ts";

const CLUSTER_SECRET = "policy-cluster-secret-0123456789abcdef";
const WEBHOOK_SECRET = "whsec_cluster_0123456789";
const LIMIT = 64 * 1024;
let pg: TestPostgres;
let nodes: TestServer[] = [];
let agent: TestAgent | undefined;
const limitedAgents: TestAgent[] = [];
let dir: string;
let served = 0;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    served++;
    const body = new Uint8Array(await req.arrayBuffer());
    return Response.json({ sha256: createHash("sha256").update(body).digest("hex"), length: body.byteLength, te: req.headers.get("transfer-encoding") });
  },
});
const policy = policyFile(`
on_http_request:
  - expressions: ["req.url.path == '/github'"]
    actions:
      - type: verify-webhook
        config: { provider: github, secret: "${WEBHOOK_SECRET}" }
`);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-policy-cluster-"));
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["c1", "c2"].map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", CLUSTER_SECRET, "--policy-body-limit", String(LIMIT), "--policy-rate-limit-sync", "50"],
      }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("clustered", { skip_warning: true }));
  // the agent is on the first node; visitors come in on the second
  agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "hooks", "--policy-file", policy.path] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await Promise.all(limitedAgents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
  policy[Symbol.dispose]();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function file(body: string | Uint8Array): string {
  const path = join(dir, `body-${files++}`);
  writeFileSync(path, body);
  return path;
}
const sha = (body: string | Uint8Array) => createHash("sha256").update(body).digest("hex");

async function viaOtherNode(path: string, body: string | Uint8Array, extra: string[]) {
  const before = served;
  const r = await curl(`http://hooks.localhost:${nodes[1]!.edgePort}${path}`, ["--data-binary", `@${file(body)}`, ...extra]);
  return { ...r, reached: served > before };
}

describe("a relayed request's body", () => {
  const event = JSON.stringify({ ref: "refs/heads/main", commits: Array.from({ length: 40 }, (_, i) => ({ id: i, message: `commit ${i}` })) });

  for (const [framing, extra] of [["a Content-Length", []], ["chunked", ["-H", "Transfer-Encoding: chunked"]]] as const) {
    test(`with ${framing}: verified on the tunnel's node; the service gets the same bytes; one byte changed is refused there`, async () => {
      const sig = ["-H", `X-Hub-Signature-256: ${await githubSignature(WEBHOOK_SECRET, event)}`];
      const good = await viaOtherNode("/github", event, [...extra, ...sig]);
      expect(good.status).toBe(200);
      expect(JSON.parse(good.body)).toMatchObject({ sha256: sha(event), length: Buffer.byteLength(event) });
      const bad = await viaOtherNode("/github", oneByteChanged(event), [...extra, ...sig]);
      expect(bad.status).toBe(403);
      expect(bad.reached).toBe(false);
    });
  }

  test("over the limit: 413 where the action runs; whole where none does", async () => {
    const big = randomBytes(LIMIT * 3);
    const refused = await viaOtherNode("/github", big, ["-H", "X-Hub-Signature-256: sha256=00"]);
    expect(refused.status).toBe(413);
    expect(refused.reached).toBe(false);
    const through = await viaOtherNode("/upload", big, ["-H", "Transfer-Encoding: chunked"]);
    expect(through.status).toBe(200);
    expect(JSON.parse(through.body)).toMatchObject({ sha256: sha(big), length: big.length });
  });
});

describe("an operator's rate limit over tunnels on both nodes", () => {
  const CAPACITY = 10;
  test("the nodes share its counts: a visitor gets about the capacity over both tunnels, not the capacity on each", async () => {
    const api = await signedIn(nodes[0]!);
    const userId = await api.createUser("limited", { skip_warning: true });
    const token = await api.createToken(userId);
    const echo = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => Response.json({ operator: req.headers.get("x-operator") }) });
    try {
      // a tunnel on each node
      for (const [i, sub] of [[0, "lim-a"], [1, "lim-b"]] as const) {
        limitedAgents.push(await startAgent({ kind: "http", target: echo.port!, server: nodes[i]!.edgeUrl, token, args: ["--subdomain", sub] }));
      }
      const made = await api.post("/api/policies", {
        name: "per visitor",
        scope: "user",
        user_id: userId,
        policy: `
on_http_request:
  - expressions: ["req.url.path == '/limited'"]
    actions:
      - type: rate-limit
        config: { name: per-ip, algorithm: sliding_window, capacity: ${CAPACITY}, rate: 60s, bucket_key: [conn.client_ip] }
  - actions: [{ type: add-headers, config: { headers: { x-operator: "yes" } } }]
`,
      });
      expect(made.status).toBe(201);
      const via = (n: number, sub: string, path: string) => curl(`http://${sub}.localhost:${nodes[n]!.edgePort}${path}`);
      // each node has the policy (read within 2 s of its making)
      for (const [n, sub] of [[0, "lim-a"], [1, "lim-b"]] as const) {
        await waitUntil(async () => JSON.parse((await via(n, sub, "/ready")).body).operator === "yes", 10_000, `the policy on ${sub}'s node`, 100);
      }
      // one visitor, to each node's tunnel in turn
      const statuses: Record<string, number[]> = { "lim-a": [], "lim-b": [] };
      for (let i = 0; i < 4 * CAPACITY; i++) {
        const [n, sub] = i % 2 === 0 ? ([0, "lim-a"] as const) : ([1, "lim-b"] as const);
        statuses[sub]!.push((await via(n, sub, "/limited")).status);
        // a few sync intervals between requests, so that a loaded machine's late NOTIFY does not
        // let each node count alone: the bound below is about what one interval lets through
        await Bun.sleep(200);
      }
      const passed = [...statuses["lim-a"]!, ...statuses["lim-b"]!].filter((s) => s === 200).length;
      // counted on each node alone, 2 x CAPACITY would pass; shared, CAPACITY and what one node let
      // through before the other heard of it (a sync interval of 50 ms: a few requests)
      expect(passed).toBeGreaterThanOrEqual(CAPACITY);
      expect(passed).toBeLessThanOrEqual(CAPACITY + 6);
      expect(statuses["lim-a"]).toContain(429);
      expect(statuses["lim-b"]).toContain(429);
    } finally {
      echo.stop(true);
    }
  }, 60_000);
});
