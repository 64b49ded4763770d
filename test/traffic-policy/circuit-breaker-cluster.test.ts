/**
 * circuit-breaker on a relayed request: the visitor comes in on the node
 * without the tunnel's agent, and the tunnel's node (where its rules and
 * its breaker live) reads the response's status to count it. After enough
 * 500s the tunnel answers 503 without its service being asked; after
 * tripped_duration requests pass again.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import type { TestServer } from "../harness/server.ts";
import { curl, type CurlReply } from "./curl.ts";
import { policyFile } from "./rig.ts";

const CLUSTER_SECRET = "breaker-cluster-secret-0123456789abcdef";
let cluster: TwoNodes | undefined;
let nodes: TestServer[] = [];
let agent: TestAgent | undefined;
let failing = true;
let hits = 0;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch() {
    hits++;
    return new Response(failing ? "broken\n" : "fine\n", { status: failing ? 500 : 200 });
  },
});
const policy = policyFile(`
on_http_request:
  - actions:
      - type: circuit-breaker
        config: { error_threshold: 0.5, volume_threshold: 4, window_duration: 30s, tripped_duration: 1s }
`);

beforeAll(async () => {
  cluster = await startTwoNodes({ ids: ["b1", "b2"], secret: CLUSTER_SECRET });
  nodes = cluster.nodes;
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("breaking", { skip_warning: true }));
  // the agent is on the first node; visitors come in on the second
  agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "breaks", "--policy-file", policy.path] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await cluster?.stop();
  upstream.stop(true);
  policy[Symbol.dispose]();
});

for (const [name, args] of [["HTTP/1.1", []], ["HTTP/2", ["--http2-prior-knowledge"]]] as const) {
  describe(`a relayed request (${name})`, () => {
    const ask = (): Promise<CurlReply> => curl(`http://breaks.localhost:${nodes[1]!.edgePort}/x`, [...args]);

    test("500s trip the breaker on the tunnel's node; while tripped the service is not asked; after tripped_duration requests pass", async () => {
      failing = true;
      hits = 0;
      // the breaker may hold the outcomes of the test before (the same tunnel): it trips within 4 failures
      let failures = 0;
      for (let r = await ask(); r.status !== 503; r = await ask()) {
        expect(r.status).toBe(500);
        expect(++failures).toBeLessThanOrEqual(4);
      }
      expect(failures).toBeGreaterThanOrEqual(2);
      expect(hits).toBe(failures);
      expect((await ask()).status).toBe(503);
      expect(hits).toBe(failures);
      failing = false;
      let passed: CurlReply | undefined;
      const deadline = Date.now() + 15_000;
      for (let i = 0; i < 300 && Date.now() < deadline && passed === undefined; i++) {
        const r = await ask();
        if (r.status !== 503) passed = r;
        else await Bun.sleep(50);
      }
      expect(passed?.status).toBe(200);
      expect((await ask()).status).toBe(200);
      expect(hits).toBe(failures + 2);
    }, 60_000);
  });
}
