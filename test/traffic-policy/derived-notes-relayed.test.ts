/**
 * Notes the agent makes itself, for a request relayed between two nodes
 * of one PostgreSQL database: the agents are on the first node, and each
 * request comes in once there and once on the second, which relays it to
 * the first, where the tunnel's policies run. The agent's inspector shows
 * the same rules, actions, log fields and answer for the relayed request
 * as for the one that came in on the agent's node, and as an agent of the
 * version before (sent every note) is shown; the agent that says
 * `derived_notes` is sent no note it can make itself, and still gets the
 * ones it cannot (log fields, an answer in the service's place).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import { waitUntil } from "../harness/wait.ts";
import { MADE_CASES, MADE_POLICY, MADE_RESPONSE, notesAgent, operatorAnswersDown, shownPolicy, type NotesAgent } from "./notes-agent.ts";

const CLUSTER_SECRET = "derived-notes-relayed-secret-0123456789abcdef";
/** Where a request comes in: on the agents' node, or on the other, which relays it. */
const ENTRIES = ["agents", "relayed"] as const;
type Entry = (typeof ENTRIES)[number];

let cluster: TwoNodes | undefined;
let service: ReturnType<typeof Bun.serve> | undefined;
let made: NotesAgent | undefined;
let told: NotesAgent | undefined;
let answered: NotesAgent | undefined;

beforeAll(async () => {
  cluster = await startTwoNodes({ ids: ["dn1", "dn2"], secret: CLUSTER_SECRET });
  const home = cluster.nodes[0]!;
  const api = await signedIn(home);
  const token = await api.createToken(await api.createUser("relayed-notes", { skip_warning: true }));
  service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  const port = service.port!;
  const agentOf = (derivedNotes: boolean, i: number) => notesAgent({ server: home.edgeUrl, token, port, subdomain: `relayed${process.pid}x${i}`, policy: MADE_POLICY, derivedNotes });
  // the third makes its notes too; the operator's response rule answers on its tunnel alone
  [made, told, answered] = await Promise.all([agentOf(true, 0), agentOf(false, 1), agentOf(true, 2)]);
  await operatorAnswersDown(api, answered.subdomain);
  for (const entry of ENTRIES) await waitUntil(async () => (await visit(answered!, entry, "/api/down?ready")).status === 503, 10_000, `the operator's policy on the tunnel, ${entry}`, 100);
}, 60_000);
afterAll(async () => {
  for (const a of [made, told, answered]) a?.stop();
  service?.stop(true);
  await cluster?.stop();
});

/** `path` through `a`'s tunnel, coming in on the agents' node or on the other one. */
async function visit(a: NotesAgent, entry: Entry, path: string, init: RequestInit = {}): Promise<Response> {
  const node = cluster!.nodes[entry === "agents" ? 0 : 1]!;
  const r = await tunnelFetch(node.edgePort, a.subdomain, path, init);
  await r.text();
  return r;
}

describe("notes the agent makes itself, for a request relayed from another node", () => {
  test("a request whose note the agent makes: the same rules and actions relayed as on the agents' node, and no note sent", async () => {
    for (const c of MADE_CASES) {
      const shown: Record<string, Awaited<ReturnType<typeof shownPolicy>>> = {};
      for (const entry of ENTRIES) {
        // each entry its own query, so that the inspector's captures are told apart; the rules read the path alone
        const path = `${c.path}?via=${entry}`;
        for (const a of [made!, told!]) {
          const r = await visit(a, entry, path, { method: c.method });
          expect(r.status).toBe(200);
          expect(r.headers.get("x-frame-options")).toBe("DENY");
        }
        // the agent sent its notes shows the response's rule once its note has come
        shown[`told ${entry}`] = await shownPolicy(told!, path, c.method, (p) => p?.response != null);
        shown[`made ${entry}`] = await shownPolicy(made!, path, c.method);
      }
      const expected = { rules: c.rules, ended: null, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE };
      for (const [who, s] of Object.entries(shown)) expect({ who, policy: s.policy }).toEqual({ who, policy: expected });
      expect(shown["made relayed"]!.noted).toBe(shown["made agents"]!.noted);
      expect(shown["made relayed"]!.noted).toBe(shown["told relayed"]!.noted);
    }
    // the version before was sent a note for each request, relayed or not; the agent that makes them none
    expect(told!.told.length).toBeGreaterThanOrEqual(MADE_CASES.length * ENTRIES.length);
    expect(made!.told).toEqual([]);
  }, 60_000);

  test("a visitor's own X-Burrow-Policy-Rules, relayed, names no rule: the inspector shows those the tunnel's rules matched", async () => {
    const sent = made!.told.length;
    const r = await visit(made!, "relayed", "/other?forged", { headers: { "x-burrow-policy-rules": "api? v2, logged" } });
    expect(r.status).toBe(200);
    expect((await shownPolicy(made!, "/other?forged")).policy).toEqual({ rules: ["#3"], ended: null, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE });
    expect(made!.told.length).toBe(sent);
  }, 20_000);

  test("relayed to an HTTP/2 visitor (curl, h2c prior knowledge): the same rules and actions, and no note sent", async () => {
    const sent = made!.told.length;
    const url = `http://${made!.subdomain}.localhost:${cluster!.nodes[1]!.edgePort}/api/h2`;
    const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{response_code}", url], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(await new Response(proc.stdout).text()).toBe("2 200");
    expect((await shownPolicy(made!, "/api/h2")).policy).toEqual({ rules: ["api, v2", "#3"], ended: null, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE });
    expect(made!.told.length).toBe(sent);
  }, 20_000);

  test("a request whose rule wrote log fields still comes as a note, relayed or not, and shows them", async () => {
    const sent = made!.told.length;
    const logged = (p: Record<string, unknown> | null) => Array.isArray(p?.logs) && (p.logs as unknown[]).length > 0;
    const expected = { rules: ["api, v2", "logged", "#3"], ended: null, logs: [{ seen: "/api/logged" }], skipped_before: 0, events: null, response: MADE_RESPONSE };
    for (const entry of ENTRIES) {
      const path = `/api/logged?via=${entry}`;
      for (const a of [made!, told!]) expect((await visit(a, entry, path)).status).toBe(200);
      expect({ entry, policy: (await shownPolicy(told!, path, "GET", logged)).policy }).toEqual({ entry, policy: expected });
      expect({ entry, policy: (await shownPolicy(made!, path, "GET", logged)).policy }).toEqual({ entry, policy: expected });
    }
    expect(made!.told.slice(sent).map((note) => note.request?.logs)).toEqual([[{ seen: "/api/logged" }], [{ seen: "/api/logged" }]]);
  }, 30_000);

  test("a response the operator's rule answered still comes as a note, relayed or not: the action, the server, the status", async () => {
    const sent = answered!.told.length;
    const expected = { rules: ["api, v2", "#3"], ended: { phase: "response", by: "server", action: "custom-response", status: 503 }, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE };
    for (const entry of ENTRIES) {
      const path = `/api/down?via=${entry}`;
      expect((await visit(answered!, entry, path)).status).toBe(503);
      expect({ entry, policy: (await shownPolicy(answered!, path, "GET", (p) => p?.ended != null)).policy }).toEqual({ entry, policy: expected });
    }
    expect(answered!.told.slice(sent).map((note) => note.status)).toEqual([503, 503]);
  }, 30_000);
});
