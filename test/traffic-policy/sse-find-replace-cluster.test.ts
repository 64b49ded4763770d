/**
 * sse-find-replace on a response relayed from another node: two nodes of
 * one PostgreSQL database, the tunnel's agent on the first, the visitor
 * (curl -N, HTTP/1.1 and HTTP/2) on the second. The tunnel's node, where
 * its rules live, rewrites each event on its way back through the relay,
 * and sends it on as it ends: the first event reaches the visitor before
 * the service sends the last.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { policyFile } from "./rig.ts";
import { curlStream, expectStreamed, REDACT_RULES, REWRITTEN, sseService, type SseService } from "./sse-service.ts";

const CLUSTER_SECRET = "sse-find-replace-cluster-secret-0123456789";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let agent: TestAgent | undefined;
let svc: SseService;
const policy = policyFile(`
on_event_stream_message:
  - actions:${REDACT_RULES}`);

beforeAll(async () => {
  svc = await sseService();
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["s1", "s2"].map((id, i) =>
      startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", CLUSTER_SECRET] }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("streamer", { skip_warning: true }));
  agent = await startAgent({ kind: "http", target: svc.port, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "events", "--policy-file", policy.path] });
}, 60_000);
afterAll(async () => {
  await agent?.stop();
  await Promise.all(nodes.map((n) => n.stop()));
  svc?.stop();
  await pg?.stop();
  policy[Symbol.dispose]();
});

const viaOtherNode = (path: string) => `http://events.localhost:${nodes[1]!.edgePort}${path}`;

describe("a relayed event stream", () => {
  for (const [carrier, args] of [["HTTP/1.1", []], ["HTTP/2", ["--http2-prior-knowledge"]]] as const) {
    test(`${carrier}: each event rewritten on the tunnel's node, chunked or close-delimited from the service`, async () => {
      for (const query of ["", "?framing=close"]) {
        const c = curlStream(viaOtherNode(`/stream${query}`), [...args]);
        expect(await c.exited).toBe(0);
        expect(c.text()).toBe(REWRITTEN);
      }
    });

    test(`${carrier}: streamed through the relay: the first event reaches curl before the service sends the last`, async () => {
      await expectStreamed(svc, viaOtherNode("/gated"), args);
    });
  }
});
