/**
 * A request relayed between two nodes of one PostgreSQL database (it
 * comes in on the node without the tunnel's agent): the tunnel's node runs
 * its policies, and its agent's inspector is told what they did with it,
 * as on one node: the request's rules and log fields, and the response's
 * rules with their actions, whether or not the tunnel has response rules,
 * and the event stream's rules that rewrote a Server-Sent Events stream;
 * for an HTTP/2 visitor (curl, h2c prior knowledge) as for an HTTP/1.1 one.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import type { TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startUpstream, type InspectedAgent, type Upstream } from "../inspect/rig.ts";
import { policyFile } from "./rig.ts";
import { curlStream, REDACT_RULES, REWRITTEN, sseService, type SseService } from "./sse-service.ts";

const CLUSTER_SECRET = "inspector-cluster-secret-0123456789abcdef";
const BOTH = policyFile(`
on_http_request:
  - name: relayed log
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}" } } }]
on_http_response:
  - name: relayed stamp
    actions: [{ type: add-headers, config: { headers: { x-stamped: "relayed" } } }]
`);
const REQUEST_ONLY = policyFile(`
on_http_request:
  - name: relayed log only
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}" } } }]
`);

const EVENTS = policyFile(`
on_http_request:
  - name: relayed log
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}" } } }]
on_event_stream_message:
  - name: relayed redact
    expressions: ["req.url.path == '/stream'"]
    actions:${REDACT_RULES}`);

let cluster: TwoNodes | undefined;
let nodes: TestServer[] = [];
let upstream: Upstream;
let both: InspectedAgent;
let requestOnly: InspectedAgent;
let sse: SseService;
let events: InspectedAgent;

beforeAll(async () => {
  cluster = await startTwoNodes({ ids: ["i1", "i2"], secret: CLUSTER_SECRET });
  nodes = cluster.nodes;
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("relayed-inspector", { skip_warning: true }));
  upstream = startUpstream();
  // the agents are on the first node; visitors come in on the second
  const rig = { server: nodes[0]!, token, [Symbol.asyncDispose]: async () => {} };
  sse = await sseService();
  [both, requestOnly, events] = await Promise.all([
    startInspectedAgent(rig, upstream.port, ["--policy-file", BOTH.path]),
    startInspectedAgent(rig, upstream.port, ["--policy-file", REQUEST_ONLY.path]),
    startInspectedAgent(rig, sse.port, ["--policy-file", EVENTS.path]),
  ]);
}, 60_000);
afterAll(async () => {
  await Promise.all([both?.[Symbol.asyncDispose](), requestOnly?.[Symbol.asyncDispose](), events?.[Symbol.asyncDispose]()]);
  await cluster?.stop();
  upstream?.[Symbol.dispose]();
  sse?.stop();
  EVENTS[Symbol.dispose]();
  BOTH[Symbol.dispose]();
  REQUEST_ONLY[Symbol.dispose]();
});

/** The policy the inspector shows for `path`, once it shows one. */
async function shown(a: InspectedAgent, path: string): Promise<unknown> {
  let policy: { logs: unknown[] } | null = null;
  await waitUntil(
    async () => {
      const found = ((await (await a.api("/api/requests")).json()) as { requests: { id: number; path: string }[] }).requests.find((s) => s.path === path);
      if (!found) return false;
      policy = ((await (await a.api(`/api/requests/${found.id}`)).json()) as { policy: { logs: unknown[] } | null }).policy;
      return policy !== null && policy.logs.length > 0;
    },
    5_000,
    `${path}'s policy in the inspector`,
  );
  return policy;
}

test("relayed, with response rules: the request's log fields and the response's rules, told by the tunnel's node", async () => {
  const r = await tunnelFetch(nodes[1]!.edgePort, both.subdomain, "/through/other");
  expect(r.status).toBe(200);
  expect(r.headers.get("x-stamped")).toBe("relayed");
  await r.text();
  expect(await shown(both, "/through/other")).toEqual({
    rules: ["relayed log"],
    ended: null,
    logs: [{ seen: "/through/other" }],
    skipped_before: 0,
    events: null,
    response: { rules: [{ rule: "relayed stamp", actions: ["add-headers"] }], logs: [] },
  });
}, 20_000);

test("relayed, without response rules: the request's log fields all the same", async () => {
  const r = await tunnelFetch(nodes[1]!.edgePort, requestOnly.subdomain, "/through/request-only");
  expect(r.status).toBe(200);
  expect(await r.text()).toBe("hello from /through/request-only");
  expect(await shown(requestOnly, "/through/request-only")).toEqual({ rules: ["relayed log only"], ended: null, logs: [{ seen: "/through/request-only" }], skipped_before: 0, events: null, response: null });
}, 20_000);

test("relayed, with event stream rules: the stream's events rewritten, and the rules that did it listed", async () => {
  const c = curlStream(`http://${events.subdomain}.localhost:${nodes[1]!.edgePort}/stream`);
  expect(await c.exited).toBe(0);
  expect(c.text()).toBe(REWRITTEN);
  expect(await shown(events, "/stream")).toEqual({
    rules: ["relayed log"],
    ended: null,
    logs: [{ seen: "/stream" }],
    skipped_before: 0,
    events: { rules: [{ rule: "relayed redact", actions: ["sse-find-replace"] }], logs: [] },
    response: null,
  });
}, 20_000);

test("relayed to an HTTP/2 visitor (curl, h2c prior knowledge): the response as the tunnel's node's rules made it, over h2, and the note", async () => {
  const url = `http://${both.subdomain}.localhost:${nodes[1]!.edgePort}/through/h2`;
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-D", "-", "-w", "\n%{http_version} %{response_code}", url], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const out = await new Response(proc.stdout).text();
  expect(out).toEndWith("hello from /through/h2\n2 200");
  expect(out.toLowerCase()).toContain("x-stamped: relayed");
  expect(await shown(both, "/through/h2")).toEqual({
    rules: ["relayed log"],
    ended: null,
    logs: [{ seen: "/through/h2" }],
    skipped_before: 0,
    events: null,
    response: { rules: [{ rule: "relayed stamp", actions: ["add-headers"] }], logs: [] },
  });
}, 20_000);
