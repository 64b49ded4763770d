/**
 * Body find-and-replace on a request relayed from another node: two nodes
 * of one PostgreSQL database, the tunnel's agent on the first, the visitor
 * on the second. The tunnel's node, where its rules live, reads the
 * request's body, rewrites it and sends the agent the new one with its
 * length (the visitor's framing a Content-Length or chunks); and rewrites
 * the service's response body there, on its way back through the relay.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { curl } from "./curl.ts";
import { echo, policyFile, type Echoed } from "./rig.ts";

const CLUSTER_SECRET = "find-replace-cluster-secret-0123456789";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let agent: TestAgent | undefined;
let dir: string;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    if (new URL(req.url).pathname === "/page") return new Response("see http://localhost:3000/a and http://localhost:3000/b\n");
    return echo(req);
  },
});
const policy = policyFile(`
on_http_request:
  - actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'card=(\\d{4})\\d+', to: 'card=$1****' }] }
on_http_response:
  - expressions: ["req.url.path == '/page'"]
    actions:
      - type: response-body-find-replace
        config: { replacements: [{ from: 'http://localhost:3000', to: 'https://example.test' }] }
`);

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-find-replace-cluster-"));
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["f1", "f2"].map((id, i) =>
      startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", CLUSTER_SECRET] }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("rewriter", { skip_warning: true }));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "scrub", "--policy-file", policy.path] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
  policy[Symbol.dispose]();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const viaOtherNode = (path: string, args: string[] = []) => curl(`http://scrub.localhost:${nodes[1]!.edgePort}${path}`, args);

describe("a relayed request", () => {
  for (const [framing, extra] of [["a Content-Length", []], ["chunked", ["-H", "Transfer-Encoding: chunked"]]] as const) {
    test(`with ${framing}: its body is rewritten on the tunnel's node; the service gets the new one with its length`, async () => {
      const path = join(dir, `body-${framing.length}`);
      writeFileSync(path, "name=ann&card=4111111111111111&x=1");
      const r = await viaOtherNode("/pay", ["--data-binary", `@${path}`, ...extra]);
      expect(r.status).toBe(200);
      const seen = JSON.parse(r.body) as Echoed;
      expect(seen.body).toBe("name=ann&card=4111****&x=1");
      expect(seen.headers["content-length"]).toBe(String(seen.body.length));
      expect(seen.headers["transfer-encoding"]).toBeUndefined();
    });
  }

  test("its response's body is rewritten on the tunnel's node, with its new length", async () => {
    const r = await viaOtherNode("/page");
    expect(r.status).toBe(200);
    expect(r.body).toBe("see https://example.test/a and https://example.test/b\n");
    expect(r.headers["content-length"]).toBe(String(r.body.length));
  });
});
