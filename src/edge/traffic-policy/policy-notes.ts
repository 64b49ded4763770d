/**
 * What the agent's request inspector is told of a request its tunnel's
 * traffic policies answered at the edge (wire.ts POLICY), which it would
 * otherwise never see: the request's line, the answer's status, the
 * tunnel's own rules that matched, and the action that ended it, with
 * whose layer it was. The operator's rules are not named to the agent
 * (its own are its user's; the server's are the operator's): an
 * operator's refusal says the action and "server". Made only for a refused
 * request to a tunnel whose agent asked, from what the run already holds
 * (the rules' labels are made when the policy is compiled), and sent at a
 * bounded pace, so a flood of refused requests costs the agent's link a
 * few notes a second.
 */
import type { LogValue, Outcome, Verdict } from "../../policy/index.ts";
import { NOTE_LOG_DEPTH, NOTE_LOG_MEMBERS, NOTE_LOG_TEXT, type NoteLogValue, type PolicyNote } from "../../protocol/messages.ts";
import type { Tunnel } from "../registry.ts";
import type { LayeredRun } from "./layered-run.ts";

/** Notes a session is sent a second at most, and in a burst. */
export const NOTES_PER_SECOND = 20;
const NOTES_BURST = 40;
/** What a note carries at most: it is shown, not acted on. */
const MAX_RULES = 20;
const MAX_LOGS = 10;
const MAX_FIELDS = 10;

/** A token bucket for a session's notes: how many were left out since the last one sent, or undefined (leave this one out). */
export class NotePace {
  private tokens = NOTES_BURST;
  private at = 0;
  private skipped = 0;

  take(now: number): number | undefined {
    this.tokens = Math.min(NOTES_BURST, this.tokens + ((now - this.at) * NOTES_PER_SECOND) / 1000);
    this.at = now;
    if (this.tokens < 1) {
      this.skipped++;
      return undefined;
    }
    this.tokens--;
    const skipped = this.skipped;
    this.skipped = 0;
    return skipped;
  }
}

/** Tells `t`'s agent (when it asked) that its policies answered this request with `status`; `by`: whose layer ended it. */
export function tellRefusal(t: Tunnel | undefined, run: LayeredRun, verdict: Exclude<Verdict, { kind: "continue" }>, status: number, by: "tunnel" | "server", own: Outcome | undefined): void {
  const agent = t?.agent;
  if (!agent?.notePolicy) return;
  const request = run.facts.request;
  const note: PolicyNote = {
    tunnel: t!.id,
    method: (request?.method ?? "").slice(0, 32),
    target: (request?.rawTarget ?? request?.target ?? "").slice(0, 2048),
    status,
    remote: run.facts.conn.clientIp.slice(0, 100),
    rules: (own?.matched ?? []).slice(0, MAX_RULES).map((m) => m.rule.slice(0, 100)),
    ended: by === "tunnel" ? { by, action: verdict.action.slice(0, 64), rule: verdict.rule.slice(0, 100) } : { by, action: verdict.action.slice(0, 64) },
  };
  if (own && own.logs.length > 0) note.logs = noteLogs(own.logs);
  agent.notePolicy(note);
}

/** A run's log fields as a note carries them (messages.ts NoteLogs): so many, names, text, lists and maps cut to their bounds, numbers, bools and null as they are. */
export function noteLogs(logs: readonly Record<string, LogValue>[]): Record<string, NoteLogValue>[] {
  return logs.slice(0, MAX_LOGS).map((fields) => Object.fromEntries(Object.entries(fields).slice(0, MAX_FIELDS).map(([k, v]) => [k.slice(0, 64), noteValue(v)])));
}

/** A list's or map's note form, made once for each (a log action's constant ones are the same frozen value each run). */
const noted = new WeakMap<object, NoteLogValue>();

function noteValue(v: LogValue): NoteLogValue {
  if (typeof v === "string") return v.length > NOTE_LOG_TEXT ? v.slice(0, NOTE_LOG_TEXT) : v;
  if (v === null || typeof v !== "object") return v;
  let out = noted.get(v);
  if (out === undefined) {
    out = cut(v, 0, { left: NOTE_VALUE_BUDGET });
    noted.set(v, out);
  }
  return out;
}

/** What a list or map of a note carries at most, its text and members counted: it is shown, not acted on. */
const NOTE_VALUE_BUDGET = 4096;

/** `v` within the note's bounds: members past NOTE_LOG_MEMBERS or past the budget left out, text cut, what nests deeper than NOTE_LOG_DEPTH as JSON text. */
function cut(v: LogValue, depth: number, budget: { left: number }): NoteLogValue {
  if (typeof v === "string") {
    const text = v.length > NOTE_LOG_TEXT ? v.slice(0, NOTE_LOG_TEXT) : v;
    budget.left -= text.length;
    return text;
  }
  budget.left -= 4;
  if (v === null || typeof v !== "object") return v;
  if (depth >= NOTE_LOG_DEPTH) return cut(JSON.stringify(v), depth, budget);
  if (Array.isArray(v)) {
    const out: NoteLogValue[] = [];
    for (const m of v as readonly LogValue[]) {
      if (out.length >= NOTE_LOG_MEMBERS || budget.left <= 0) break;
      out.push(cut(m, depth + 1, budget));
    }
    return out;
  }
  const out: Record<string, NoteLogValue> = {};
  let members = 0;
  for (const [k, m] of Object.entries(v as { readonly [name: string]: LogValue })) {
    if (members++ >= NOTE_LOG_MEMBERS || budget.left <= 0) break;
    budget.left -= k.length;
    out[k.slice(0, 64)] = cut(m, depth + 1, budget);
  }
  return out;
}

/** How an agent's HELLO said it reads log fields: `typed_logs` (numbers and bools), `json_logs` too (null, lists and maps), or neither (text). */
export type LogsRead = "text" | "typed" | "json";

/** Log fields as an agent that does not read every JSON value reads them: text, or typed but for null, lists and maps, which go as JSON text. */
export function logsFor(logs: readonly Record<string, NoteLogValue>[], reads: "text" | "typed"): Record<string, NoteLogValue>[] {
  const asText = (v: NoteLogValue): NoteLogValue => {
    if (typeof v === "string") return v;
    if (reads === "typed" && (typeof v === "number" || typeof v === "boolean")) return v;
    const text = v !== null && typeof v === "object" ? JSON.stringify(v) : String(v);
    return text.length > NOTE_LOG_TEXT ? text.slice(0, NOTE_LOG_TEXT) : text;
  };
  return logs.map((fields) => Object.fromEntries(Object.entries(fields).map(([k, v]) => [k, asText(v)])));
}
