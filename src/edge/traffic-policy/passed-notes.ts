/**
 * What the agent's request inspector is told of a request its tunnel's
 * traffic policies let through (wire.ts POLICY_PASSED): in each phase (the
 * request's, the response's, and the event stream's, judged on the
 * response's head), the tunnel's own rules that matched with their
 * actions, and its log actions' fields; when a response rule answered in the service's place,
 * which action did, whose layer it was and the status the visitor got.
 * The operator's rules are not named (as in policy-notes.ts).
 *
 * It is told once the edge has judged the response's head (or has it,
 * where no response rule runs): the agent has the request by then, the
 * latest on its stream. What it costs: a request to a tunnel without a
 * policy, or whose agent did not ask (its inspector is off), nothing; one
 * whose agent asked, two field writes (toldWhenAnswered), and a frame only
 * when something matched or logged; none when the agent makes the note
 * itself (derived-notes.ts). The frame goes with the turn's batch
 * to the agent, not in a write of its own (mux.ts sendEncodedControlInBatch),
 * and in the form the agent knows again without parsing it
 * (protocol/policy-passed.ts).
 */
import type { Outcome, Policy, RuleTrace, Verdict } from "../../policy/index.ts";
import type { PhaseNote, PolicyPassed } from "../../protocol/messages.ts";
import type { Tunnel } from "../registry.ts";
import type { LayeredRun } from "./layered-run.ts";
import { noteLogs } from "./policy-notes.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

/** What a phase's note carries at most: it is shown, not acted on. */
const MAX_RULES = 20;
const MAX_ACTIONS = 20;

/** `run`'s request, on the agent's stream `stream`, is told of once its response is judged (tellPassed), when `t`'s agent asked. */
export function toldWhenAnswered(run: LayeredRun, t: Tunnel, stream: number): void {
  const agent = t.agent;
  if (!agent?.tellsPassed) return;
  // a note the agent makes itself (derived-notes.ts): none is armed, so none is made when the response comes
  if (agent.makesNotes) {
    const made = t.policy?.notesMade;
    if (made !== undefined && !(made.logs && ownLogged(run, t.policy))) return;
  }
  run.noteTunnel = t;
  run.noteStream = stream;
}

/** The tunnel's own request rules wrote log fields for the request. */
function ownLogged(run: LayeredRun, policy: TunnelPolicy | undefined): boolean {
  const own = ownRequest(run, policy);
  return own !== undefined && own.logs.length > 0;
}

/** The tunnel's own request rules left something to tell (a path that otherwise reads no response's head asks, to read it for this). */
export function requestToTell(run: LayeredRun): boolean {
  if (run.noteTunnel === undefined) return false;
  const own = ownRequest(run, run.noteTunnel.policy);
  return own !== undefined && (own.matched.length > 0 || own.logs.length > 0);
}

/**
 * Tells the agent (once) what the policies did with the request, when
 * something is to be told. `verdict`: the response phase's, when it ran
 * (`policy`: the layers it ran through, as the request's were).
 */
export function tellPassed(run: LayeredRun, policy: TunnelPolicy | undefined, verdict?: Verdict): void {
  const t = run.noteTunnel;
  if (t === undefined) return;
  run.noteTunnel = undefined;
  if (!policy) return;
  const own = ownRequest(run, policy);
  const ownEvents = verdict ? eventsRun(run, policy) : undefined;
  if (verdict === undefined || verdict.kind === "continue") {
    const ownResponse = verdict ? responseRun(run, policy).own : undefined;
    if (tellAsBefore(run, t, own, ownResponse, ownEvents)) return;
  }
  const request = own && (own.matched.length > 0 || own.logs.length > 0) ? phaseNote(own) : undefined;
  const response = verdict ? responseNote(run, policy, verdict) : undefined;
  const events = ownEvents && (ownEvents.matched.length > 0 || ownEvents.logs.length > 0) ? phaseNote(ownEvents) : undefined;
  if (!request && !response && !events) return;
  const note: PolicyPassed = { tunnel: t.id, stream: run.noteStream };
  if (request) note.request = request;
  if (response) note.response = response;
  if (events) note.events = events;
  if (verdict?.kind === "respond") note.status = verdict.response.status;
  t.agent?.notePassed?.(note);
}

/**
 * tellPassed for a response whose rules made no run: they add constant
 * fields and have no condition (TunnelPolicy.responseFields), so each of
 * the tunnel's own matched, with all of its actions, as its note says
 * (made once a policy).
 */
export function tellPassedKnown(run: LayeredRun, policy: TunnelPolicy): void {
  const t = run.noteTunnel;
  if (t === undefined) return;
  run.noteTunnel = undefined;
  const own = ownRequest(run, policy);
  const response = knownResponse(policy);
  if (tellAsBefore(run, t, own, response, undefined)) return;
  const request = own && (own.matched.length > 0 || own.logs.length > 0) ? phaseNote(own) : undefined;
  if (!request && !response) return;
  const note: PolicyPassed = { tunnel: t.id, stream: run.noteStream };
  if (request) note.request = request;
  if (response) note.response = response;
  t.agent?.notePassed?.(note);
}

const known = new WeakMap<TunnelPolicy, PhaseNote | null>();

/** The last policy asked and its note: most requests are the same tunnel's as the one before (no WeakMap lookup). */
let lastKnown: { policy: TunnelPolicy | undefined; note: PhaseNote | null } = { policy: undefined, note: null };

function knownResponse(policy: TunnelPolicy): PhaseNote | undefined {
  if (lastKnown.policy === policy) return lastKnown.note ?? undefined;
  let note = known.get(policy);
  if (note === undefined) {
    const rules = policy.own?.rulesOf("on_http_response") ?? [];
    note = rules.length === 0 ? null : { rules: rules.slice(0, MAX_RULES).map((r) => ({ rule: r.label.slice(0, 100), actions: r.actions.slice(0, MAX_ACTIONS).map((a) => a.type.slice(0, 64)) })) };
    known.set(policy, note);
  }
  lastKnown = { policy, note };
  return note ?? undefined;
}

/** The tunnel's own policy's run of the request: the last of the request's runs, when its policy has request rules (it runs last). */
function ownRequest(run: LayeredRun, policy: TunnelPolicy | undefined): Outcome | undefined {
  if (!policy?.own?.has("on_http_request")) return undefined;
  for (let i = run.runs.length - 1; i >= 0; i--) if (run.runs[i]!.phase === "on_http_request") return run.runs[i];
  return undefined;
}

/**
 * The response's phase: its runs follow the request's, one for each layer
 * with response rules in the response's order (the flags, the tunnel's
 * own, the operator's), up to the one that ended it. Read in place: no
 * list made for a response with nothing to tell.
 */
function responseRun(run: LayeredRun, policy: TunnelPolicy): { own: Outcome | undefined; last: Policy | undefined } {
  const runs = run.runs;
  let r = 0;
  while (r < runs.length && runs[r]!.phase !== "on_http_response") r++;
  let own: Outcome | undefined;
  let last: Policy | undefined;
  for (const layer of policy.responseLayers) {
    if (r >= runs.length) break;
    if (!layer.has("on_http_response")) continue;
    if (layer === policy.own) own = runs[r];
    last = layer;
    r++;
  }
  return { own, last };
}

/**
 * The tunnel's own run of the event stream phase, when it ran: its runs
 * follow the response's (LayeredRun.respond), one for each layer with
 * event stream rules in the response's order, up to the one that ended it.
 */
function eventsRun(run: LayeredRun, policy: TunnelPolicy): Outcome | undefined {
  if (!policy.own?.has("on_event_stream_message")) return undefined;
  const runs = run.runs;
  let r = 0;
  while (r < runs.length && runs[r]!.phase !== "on_event_stream_message") r++;
  for (const layer of policy.responseLayers) {
    if (r >= runs.length) return undefined;
    if (!layer.has("on_event_stream_message")) continue;
    if (layer === policy.own) return runs[r];
    r++;
  }
  return undefined;
}

function responseNote(run: LayeredRun, policy: TunnelPolicy, verdict: Verdict): PhaseNote | undefined {
  const { own, last } = responseRun(run, policy);
  const note = own && (own.matched.length > 0 || own.logs.length > 0) ? phaseNote(own) : undefined;
  if (verdict.kind === "continue") return note;
  // the last layer that ran ended it: the tunnel's (its file, or its flags), or the operator's, whose rule is not named
  const action = verdict.action.slice(0, 64);
  const ended: PhaseNote["ended"] = last === policy.own ? { by: "tunnel", action, rule: verdict.rule.slice(0, 100) } : last === policy.flags ? { by: "tunnel", action } : { by: "server", action };
  return { ...(note ?? { rules: [] }), ended };
}

function phaseNote(out: Outcome): PhaseNote {
  const note: PhaseNote = {
    rules: out.matched.slice(0, MAX_RULES).map((m) => ({ rule: m.rule.slice(0, 100), actions: (m.types ?? m.actions.map((a) => a.type)).slice(0, MAX_ACTIONS).map((t) => t.slice(0, 64)) })),
  };
  if (out.logs.length > 0) note.logs = noteLogs(out.logs);
  return note;
}

/**
 * The last note told with nothing of its own (no log fields, no answer in
 * the service's place), encoded: a tunnel's requests match the same rules
 * request after request, and a brief run's traces (policy.ts) are the same
 * objects each time, so the same phases are known by who they are and
 * their JSON is not made again. `response`: the response's run's traces,
 * or a note known at load (knownResponse); `events`: the event stream's.
 */
let last: { request: readonly RuleTrace[] | undefined; response: readonly RuleTrace[] | PhaseNote | undefined; events: readonly RuleTrace[] | undefined; tail: Uint8Array } | undefined;
const encoder = new TextEncoder();

/** Tells `t`'s agent from the last note's bytes when the phases are the same; false when this note is not one for them (log fields), so it is made as always. */
function tellAsBefore(run: LayeredRun, t: Tunnel, own: Outcome | undefined, response: Outcome | PhaseNote | undefined, ownEvents: Outcome | undefined): boolean {
  if (t.agent?.notePassedEncoded === undefined) return false;
  if ((own && own.logs.length > 0) || (response && "logs" in response && response.logs !== undefined && response.logs.length > 0) || (ownEvents && ownEvents.logs.length > 0)) return false;
  const request = own && own.matched.length > 0 ? own.matched : undefined;
  const responseKey = response === undefined ? undefined : "matched" in response ? (response.matched.length > 0 ? response.matched : undefined) : response;
  const events = ownEvents && ownEvents.matched.length > 0 ? ownEvents.matched : undefined;
  // nothing to tell
  if (request === undefined && responseKey === undefined && events === undefined) return true;
  if (last === undefined || !sameTraces(last.request, request) || !sameKey(last.response, responseKey) || !sameTraces(last.events, events)) {
    const note: { request?: PhaseNote; response?: PhaseNote; events?: PhaseNote } = {};
    if (request) note.request = phaseNote(own!);
    if (responseKey) note.response = "matched" in response! ? phaseNote(response as Outcome) : (response as PhaseNote);
    if (events) note.events = phaseNote(ownEvents!);
    // the note's fields after `{"tunnel":...,"stream":N` (agents.ts notePassedEncoded)
    last = { request, response: responseKey, events, tail: encoder.encode(`,${JSON.stringify(note).slice(1)}`) };
  }
  t.agent.notePassedEncoded(t.id, run.noteStream, last.tail);
  return true;
}

function sameTraces(a: readonly RuleTrace[] | undefined, b: readonly RuleTrace[] | undefined): boolean {
  if (a === b) return true;
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameKey(a: readonly RuleTrace[] | PhaseNote | undefined, b: readonly RuleTrace[] | PhaseNote | undefined): boolean {
  if (a === b) return true;
  return Array.isArray(a) && Array.isArray(b) && sameTraces(a, b);
}
