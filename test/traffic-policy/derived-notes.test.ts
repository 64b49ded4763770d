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
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { waitUntil } from "../harness/wait.ts";
import { startRig, type Rig } from "../inspect/rig.ts";
import { MADE_CASES, MADE_POLICY as POLICY, MADE_RESPONSE, notesAgent, operatorAnswersDown, shownPolicy as shown, type NotesAgent as InProcess } from "./notes-agent.ts";

let rig: Rig;
let service: ReturnType<typeof Bun.serve>;
let made: InProcess;
let told: InProcess;
let answered: InProcess;
let n = 0;

/** An agent in this process with its inspector; `derivedNotes`: false, the version before (it is sent every note). */
const inProcess = (derivedNotes: boolean) => notesAgent({ server: rig.server.edgeUrl, token: rig.token, port: service.port!, subdomain: `made${process.pid}x${n++}`, policy: POLICY, derivedNotes });

beforeAll(async () => {
  rig = await startRig();
  service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  [made, told, answered] = await Promise.all([inProcess(true), inProcess(false), inProcess(true)]);
  // the operator's response rule that answers, on the third tunnel alone
  const api = await signedIn(rig.server);
  await operatorAnswersDown(api, answered.subdomain);
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


describe("notes the agent makes itself", () => {
  test("the inspector shows the same rules and actions as an agent sent the notes, and no note is sent for them", async () => {
    for (const c of MADE_CASES) {
      for (const a of [made, told]) {
        const r = await visit(a, c.path, c.method);
        expect(r.status).toBe(200);
        expect(r.headers.get("x-frame-options")).toBe("DENY");
      }
      // the agent sent its notes shows the response's rule once its note has come
      const before = await shown(told, c.path, c.method, (p) => p?.response != null);
      const after = await shown(made, c.path, c.method);
      expect(after.policy).toEqual(before.policy);
      expect(after.policy).toEqual({ rules: c.rules, ended: null, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE });
      expect(after.noted).toBe(before.noted);
    }
    // each of the version before's requests came as a note; none of these to the agent that makes them
    expect(told.told.length).toBeGreaterThanOrEqual(MADE_CASES.length);
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
    expect(after.policy).toEqual({ rules: ["api, v2", "#3"], ended: null, logs: [], skipped_before: 0, events: null, response: MADE_RESPONSE });
    expect(made.told.length).toBe(sent);
  }, 20_000);

  test("a request whose rule wrote log fields still comes as a note, and shows them", async () => {
    for (const a of [made, told]) expect((await visit(a, "/api/logged")).status).toBe(200);
    const logged = (p: Record<string, unknown> | null) => Array.isArray(p?.logs) && (p.logs as unknown[]).length > 0;
    const before = await shown(told, "/api/logged", "GET", logged);
    const after = await shown(made, "/api/logged", "GET", logged);
    expect(after.policy).toEqual(before.policy);
    expect(after.policy).toEqual({ rules: ["api, v2", "logged", "#3"], ended: null, logs: [{ seen: "/api/logged" }], skipped_before: 0, events: null, response: MADE_RESPONSE });
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
      events: null,
      response: MADE_RESPONSE,
    });
    expect(answered.told.some((note) => note.status === 503)).toBe(true);
  }, 20_000);
});
