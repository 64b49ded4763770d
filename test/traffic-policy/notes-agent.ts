/**
 * An agent run in the test's own process with its inspector, for the
 * tests of the notes an agent makes itself (derived-notes,
 * derived-notes-relayed): it keeps every POLICY_PASSED note the edge sent
 * it, and its inspector is read as the page reads it.
 */
import { Agent, type AgentOutput } from "../../src/agent/client.ts";
import { startInspector } from "../../src/agent/inspector/server.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { tunnelOf } from "../../src/agent/settings/tunnel-spec.ts";
import type { PolicyPassed } from "../../src/protocol/messages.ts";
import type { AdminClient } from "../harness/admin.ts";
import { waitUntil } from "../harness/wait.ts";

/**
 * A tunnel's own policy whose notes the agent can make: its request rules'
 * names are each their own in the X-Burrow-Policy-Rules field ("api, v2"
 * is spelt "api? v2" there), and its response rule is known at load. A
 * request to /api/logged writes log fields, which come only in a note.
 */
export const MADE_POLICY = `
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

/** MADE_POLICY's response rule, as every response's note names it. */
export const MADE_RESPONSE = { rules: [{ rule: "security", actions: ["add-headers"] }], logs: [] };

/** Requests whose notes the agent makes from MADE_POLICY, and the request rules each matches. */
export const MADE_CASES = [
  { path: "/api/one", method: "GET", rules: ["api, v2", "#3"] },
  { path: "/api/two", method: "POST", rules: ["api, v2"] },
  { path: "/other", method: "GET", rules: ["#3"] },
  { path: "/other", method: "DELETE", rules: [] },
];

/** The operator's response rule that answers 503 in the service's place for /api/down, on `subdomain`'s tunnel alone. */
export async function operatorAnswersDown(api: AdminClient, subdomain: string): Promise<void> {
  const policy = await api.post("/api/policies", {
    name: "maintenance",
    scope: "hostname",
    hostname: `${subdomain}.localhost`,
    policy: "on_http_response: [{name: operator-rule, expressions: [\"req.url.path == '/api/down'\"], actions: [{type: custom-response, config: {status_code: 503, body: maintenance}}]}]",
  });
  if (policy.status !== 201) throw new Error(`policy not made: ${JSON.stringify(policy.body)}`);
}

export interface NotesAgent {
  agent: Agent;
  subdomain: string;
  /** Its inspector's URL. */
  inspector: string;
  /** The POLICY_PASSED notes the edge sent it. */
  told: PolicyPassed[];
  stop(): void;
}

/**
 * An agent of `server` (its edge's URL) for one http tunnel to the local
 * `port` with `policy` as its own; `derivedNotes`: false, the version
 * before (it is sent every note). Stopped again when it is not READY in
 * time.
 */
export async function notesAgent(o: { server: string; token: string; port: number; subdomain: string; policy: string; derivedNotes: boolean }): Promise<NotesAgent> {
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
  const tunnel = { name: "web", ...tunnelOf({ kind: "http", target: parseTarget(String(o.port), true), subdomain: o.subdomain, policy: o.policy }) };
  const agent = new Agent({ server: o.server, token: o.token, tunnels: [tunnel], out: inspector.watch(out), inspector: inspector.store, derivedNotes: o.derivedNotes });
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
  return { agent, subdomain: o.subdomain, inspector: inspector.url, told: received, stop };
}

interface Summary {
  id: number;
  method: string;
  path: string;
  policy_noted: boolean;
}

/**
 * The inspector's policy of the newest capture of `method path`, once
 * `ready` says it is all there, and whether the list says it was noted.
 */
export async function shownPolicy(a: NotesAgent, path: string, method = "GET", ready: (p: Record<string, unknown> | null) => boolean = (p) => p !== null) {
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
