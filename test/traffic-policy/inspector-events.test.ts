/**
 * The agent's request inspector and the event stream phase: the tunnel's
 * own on_event_stream_message rules that matched a response (their
 * sse-find-replace rewrote its events), listed as the response's rules
 * are, through a real server, real agents with their inspectors and a
 * real Server-Sent Events service read by curl -N. A rule with a
 * condition is told in the note the edge sends (POLICY_PASSED), over
 * HTTP/1.1 and HTTP/2, beside the request's log fields too, and a
 * response it did not match lists none; a rule
 * with none is listed by the agent itself (derived notes), with no note
 * sent, the same as an agent of the version before is shown from the
 * notes it is sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startRig, type Rig } from "../inspect/rig.ts";
import { notesAgent, shownPolicy as shown, type NotesAgent } from "./notes-agent.ts";
import { curlStream, REDACT_RULES, REWRITTEN, sseService, type SseService } from "./sse-service.ts";

/** An event stream rule with a condition: its note is the run's, sent by the edge; a request rule's log fields make it a note written out whole. */
const WHEN = `
on_http_request:
  - name: logged
    expressions: ["req.url.query == 'logged'"]
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}" } } }]
on_event_stream_message:
  - name: redact streams
    expressions: ["req.url.path == '/stream'"]
    actions:${REDACT_RULES}`;

/** An event stream rule with none, beside a request rule: known at load, so the agent lists it itself. */
const ALWAYS = `
on_http_request:
  - name: streams
    expressions: ["req.url.path == '/stream'"]
    actions: [{ type: add-headers, config: { headers: { x-stream: "1" } } }]
on_event_stream_message:
  - name: redact
    actions:${REDACT_RULES}`;

let rig: Rig;
let svc: SseService;
let sent: NotesAgent;
let made: NotesAgent;
let told: NotesAgent;
let n = 0;

const inProcess = (policy: string, derivedNotes: boolean) => notesAgent({ server: rig.server.edgeUrl, token: rig.token, port: svc.port, subdomain: `events${process.pid}x${n++}`, policy, derivedNotes });

beforeAll(async () => {
  rig = await startRig();
  svc = await sseService();
  [sent, made, told] = await Promise.all([inProcess(WHEN, true), inProcess(ALWAYS, true), inProcess(ALWAYS, false)]);
}, 40_000);
afterAll(async () => {
  for (const a of [sent, made, told]) a?.stop();
  svc?.stop();
  await rig?.[Symbol.asyncDispose]();
});

/** The stream read whole through `a`'s tunnel, its events rewritten. */
async function streamed(a: NotesAgent, path: string, args: string[] = []): Promise<string> {
  const c = curlStream(`http://${a.subdomain}.localhost:${rig.server.edgePort}${path}`, args);
  expect(await c.exited).toBe(0);
  return c.text();
}

const REDACTED = (rule: string) => ({ rules: [{ rule, actions: ["sse-find-replace"] }], logs: [] });

describe("the inspector lists the event stream rules that matched", () => {
  test("HTTP/1.1: from the note the edge sends, as the response's rules are", async () => {
    expect(await streamed(sent, "/stream")).toBe(REWRITTEN);
    const { policy } = await shown(sent, "/stream", "GET", (p) => p?.events != null);
    expect(policy).toEqual({ rules: [], ended: null, logs: [], skipped_before: 0, response: null, events: REDACTED("redact streams") });
    expect(sent.told.some((note) => note.events?.rules[0]?.rule === "redact streams")).toBe(true);
  }, 20_000);

  test("HTTP/2 (curl, h2c prior knowledge): the same", async () => {
    expect(await streamed(sent, "/stream?h2", ["--http2-prior-knowledge"])).toBe(REWRITTEN);
    const { policy } = await shown(sent, "/stream?h2", "GET", (p) => p?.events != null);
    expect(policy).toEqual({ rules: [], ended: null, logs: [], skipped_before: 0, response: null, events: REDACTED("redact streams") });
  }, 20_000);

  test("with the request's log fields (a note written out whole): both phases", async () => {
    expect(await streamed(sent, "/stream?logged")).toBe(REWRITTEN);
    const { policy } = await shown(sent, "/stream?logged", "GET", (p) => p?.events != null);
    expect(policy).toEqual({ rules: ["logged"], ended: null, logs: [{ seen: "/stream" }], skipped_before: 0, response: null, events: REDACTED("redact streams") });
  }, 20_000);

  test("a response its rule did not match lists none", async () => {
    const before = sent.told.length;
    await streamed(sent, "/layers");
    // a note for a later request that matched: notes come in order, so one for /layers would have come before it
    await streamed(sent, "/stream?after");
    await shown(sent, "/stream?after", "GET", (p) => p?.events != null);
    expect((await shown(sent, "/layers", "GET", () => true)).policy).toBeNull();
    expect(sent.told.length).toBe(before + 1);
  }, 20_000);

  test("a rule with no condition: the agent lists it itself, no note is sent, and it shows what an agent sent the notes shows", async () => {
    for (const a of [made, told]) expect(await streamed(a, "/stream")).toBe(REWRITTEN);
    const before = await shown(told, "/stream", "GET", (p) => p?.events != null);
    const after = await shown(made, "/stream", "GET");
    expect(after.policy).toEqual(before.policy);
    expect(after.policy).toEqual({ rules: ["streams"], ended: null, logs: [], skipped_before: 0, response: null, events: REDACTED("redact") });
    expect(told.told.length).toBeGreaterThan(0);
    expect(made.told).toEqual([]);
  }, 20_000);
});
