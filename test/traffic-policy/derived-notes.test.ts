/**
 * Notes the agent makes itself, through a real server, real agents with
 * their inspectors and a local service: for a tunnel whose own rules'
 * notes say only what the request's X-Burrow-Policy-Rules field and the
 * rules themselves say, an agent that says `derived_notes` is sent no
 * POLICY_PASSED note for such a request, and its inspector shows the
 * same rules and actions, in both phases, as an agent of the version
 * before is shown from the notes it is sent. A request whose rules wrote
 * log fields still comes as a note; so does one whose response the
 * operator's rule answered; an agent that does not say it is sent every
 * note.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Agent, type AgentOutput } from "../../src/agent/client.ts";
import { startInspector } from "../../src/agent/inspector/server.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { tunnelOf } from "../../src/agent/settings/tunnel-spec.ts";
import type { PolicyPassed } from "../../src/protocol/messages.ts";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { waitUntil } from "../harness/wait.ts";
import { startRig, type Rig } from "../inspect/rig.ts";

const POLICY = `
on_http_request:
  - name: "api, v2"
    expressions: ["req.url.path.startsWith('/api')"]
    actions: [{ type: add-headers, config: { headers: { x-api: "1" } } }]
  - name: logged
    expressions: ["req.url.path == '/api/logged'"]
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}" } } }]
  - expressions: ["req.method == 'GET'"]
    actions:
      - { type: add-headers, config: { headers: { x-get: "1" } } }
      - { type: remove-headers, config: { headers: [x-nothing] } }
on_http_response:
  - name: security
    actions: [{ type: add-headers, config: { headers: { x-frame-options: DENY } } }]
`;

interface InProcess {
  agent: Agent;
  subdomain: string;
  inspector: string;
  /** The POLICY_PASSED notes the edge sent it. */
  told: PolicyPassed[];
  stop(): void;
}

let rig: Rig;
let service: ReturnType<typeof Bun.serve>;
let made: InProcess;
let told: InProcess;
let answered: InProcess;
let n = 0;

/** An agent in this process with its inspector; `derivedNotes`: false, the version before (it is sent every note). */
async function inProcess(derivedNotes: boolean): Promise<InProcess> {
  const subdomain = `made${process.pid}x${n++}`;
  const started = startInspector({ address: { host: "127.0.0.1", port: 0 }, keep: 100, memoryBytes: 8 * 1024 * 1024 });
  if (started.kind !== "listening") throw new Error("no inspector");
  const inspector = started.inspector;
  const received: PolicyPassed[] = [];
  let ready = false;
  const out: AgentOutput = {
    ready: () => void (ready = true),
    request() {},
    connection() {},
    reconnecting() {},
    refused: (code, message) => void console.error(`refused ${code} ${message}`),
    policyPassed: (_t, note) => void received.push(note),
  };
  const tunnel = { name: "web", ...tunnelOf({ kind: "http", target: parseTarget(String(service.port), true), subdomain, policy: POLICY }) };
  const agent = new Agent({ server: rig.server.edgeUrl, token: rig.token, tunnels: [tunnel], out: inspector.watch(out), inspector: inspector.store, derivedNotes });
  void agent.run();
  const stop = () => {
    agent.stop();
    inspector.stop();
  };
  try {
    await waitUntil(() => ready, 15_000, "READY");
  } catch (err) {
    stop();
    throw err;
  }
  return { agent, subdomain, inspector: inspector.url, told: received, stop };
}

beforeAll(async () => {
  rig = await startRig();
  service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  [made, told, answered] = await Promise.all([inProcess(true), inProcess(false), inProcess(true)]);
  // the operator's response rule that answers, on the third tunnel alone
  const api = await signedIn(rig.server);
  const policy = await api.post("/api/policies", {
    name: "maintenance",
    scope: "hostname",
    hostname: `${answered.subdomain}.localhost`,
    policy: "on_http_response: [{name: operator-rule, expressions: [\"req.url.path == '/api/down'\"], actions: [{type: custom-response, config: {status_code: 503, body: maintenance}}]}]",
  });
  if (policy.status !== 201) throw new Error(`policy not made: ${JSON.stringify(policy.body)}`);
  await waitUntil(async () => (await visit(answered, "/api/down")).status === 503, 10_000, "the operator's policy on the tunnel", 100);
}, 40_000);
afterAll(async () => {
  for (const a of [made, told, answered]) a?.stop();
  service?.stop(true);
  await rig?.[Symbol.asyncDispose]();
});

async function visit(a: InProcess, path: string, method = "GET"): Promise<Response> {
  const r = await tunnelFetch(rig.server.edgePort, a.subdomain, path, { method });
  await r.text();
  return r;
}

interface Summary {
  id: number;
  method: string;
  path: string;
  policy_noted: boolean;
}

/** The inspector's policy of the newest capture of `method path`, once `ready` says it is all there. */
async function shown(a: InProcess, path: string, method = "GET", ready: (p: Record<string, unknown> | null) => boolean = (p) => p !== null) {
  let policy: Record<string, unknown> | null = null;
  let noted = false;
  await waitUntil(
    async () => {
      const list = async () => ((await (await fetch(`${a.inspector}/api/requests`)).json()) as { requests: Summary[] }).requests.find((s) => s.path === path && s.method === method);
      const found = await list();
      if (!found) return false;
      policy = ((await (await fetch(`${a.inspector}/api/requests/${found.id}`)).json()) as { policy: Record<string, unknown> | null }).policy;
      if (!ready(policy)) return false;
      // the list read again after the capture's policy: a note that came between the two reads is in both
      noted = (await list())?.policy_noted ?? false;
      return true;
    },
    5_000,
    `${method} ${path} in the inspector`,
  );
  return { policy: policy as Record<string, unknown> | null, noted };
}

const SECURITY = { rules: [{ rule: "security", actions: ["add-headers"] }], logs: [] };

describe("notes the agent makes itself", () => {
  test("the inspector shows the same rules and actions as an agent sent the notes, and no note is sent for them", async () => {
    const cases = [
      { path: "/api/one", method: "GET", rules: ["api, v2", "#3"] },
      { path: "/api/two", method: "POST", rules: ["api, v2"] },
      { path: "/other", method: "GET", rules: ["#3"] },
      { path: "/other", method: "DELETE", rules: [] },
    ];
    for (const c of cases) {
      for (const a of [made, told]) {
        const r = await visit(a, c.path, c.method);
        expect(r.status).toBe(200);
        expect(r.headers.get("x-frame-options")).toBe("DENY");
      }
      // the agent sent its notes shows the response's rule once its note has come
      const before = await shown(told, c.path, c.method, (p) => p?.response != null);
      const after = await shown(made, c.path, c.method);
      expect(after.policy).toEqual(before.policy);
      expect(after.policy).toEqual({ rules: c.rules, ended: null, logs: [], skipped_before: 0, response: SECURITY });
      expect(after.noted).toBe(before.noted);
    }
    // each of the version before's requests came as a note; none of these to the agent that makes them
    expect(told.told.length).toBeGreaterThanOrEqual(cases.length);
    expect(made.told).toEqual([]);
  }, 40_000);

  test("HTTP/2 (curl, h2c prior knowledge): the same rules and actions, and no note sent", async () => {
    const sent = made.told.length;
    for (const a of [made, told]) {
      const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{response_code}", `http://${a.subdomain}.localhost:${rig.server.edgePort}/api/h2`], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
      expect(await new Response(proc.stdout).text()).toBe("2 200");
    }
    const before = await shown(told, "/api/h2", "GET", (p) => p?.response != null);
    const after = await shown(made, "/api/h2", "GET");
    expect(after.policy).toEqual(before.policy);
    expect(after.policy).toEqual({ rules: ["api, v2", "#3"], ended: null, logs: [], skipped_before: 0, response: SECURITY });
    expect(made.told.length).toBe(sent);
  }, 20_000);

  test("a request whose rule wrote log fields still comes as a note, and shows them", async () => {
    for (const a of [made, told]) expect((await visit(a, "/api/logged")).status).toBe(200);
    const logged = (p: Record<string, unknown> | null) => Array.isArray(p?.logs) && (p.logs as unknown[]).length > 0;
    const before = await shown(told, "/api/logged", "GET", logged);
    const after = await shown(made, "/api/logged", "GET", logged);
    expect(after.policy).toEqual(before.policy);
    expect(after.policy).toEqual({ rules: ["api, v2", "logged", "#3"], ended: null, logs: [{ seen: "/api/logged" }], skipped_before: 0, response: SECURITY });
    expect(made.told.map((note) => note.request?.logs)).toEqual([[{ seen: "/api/logged" }]]);
  }, 20_000);

  test("a response the operator's rule answered still comes as a note: the action, the server, the status", async () => {
    const r = await visit(answered, "/api/down");
    expect(r.status).toBe(503);
    const { policy } = await shown(answered, "/api/down", "GET", (p) => p?.ended != null);
    expect(policy).toEqual({
      rules: ["api, v2", "#3"],
      ended: { phase: "response", by: "server", action: "custom-response", status: 503 },
      logs: [],
      skipped_before: 0,
      response: SECURITY,
    });
    expect(answered.told.some((note) => note.status === 503)).toBe(true);
  }, 20_000);
});
