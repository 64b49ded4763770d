/**
 * The POLICY_PASSED note of a request, made here rather than sent: for a
 * tunnel whose READY (or ADDED) entry lists its rules (messages.ts
 * DerivedNotes), the edge sends no note that would say only what that
 * list and the request's X-Burrow-Policy-Rules field say. The note is
 * made from them when someone looks (json.ts), never as requests pass; a
 * note the edge sent (log fields, an answer in the service's place)
 * replaces it.
 */
import type { DerivedNotes, HeaderList, PhaseNote, PolicyPassed } from "../../protocol/messages.ts";
import { fieldName } from "../../protocol/policy-rules-field.ts";
import type { Capture } from "./capture.ts";

/** The edge's field naming the tunnel's own rules that matched a request it sent on (edge/traffic-policy/layered-run.ts). */
const POLICY_RULES_FIELD = "x-burrow-policy-rules";

/** A note's phases: what json.ts reads of it. */
export type NotePhases = Pick<PolicyPassed, "request" | "response" | "events">;

/** Each list's rules by their names as the field spells them, made once a list. */
const byName = new WeakMap<DerivedNotes, Map<string, PhaseNote["rules"][number]>>();

/** The capture's note as the edge would have sent it, when its tunnel's notes are made here; undefined when there is none (nothing to tell, or its notes are sent). */
export function madeNote(c: Capture): NotePhases | undefined {
  const notes = c.tunnel.notes;
  // a replay went to the service alone: the edge judged only the original
  if (notes === undefined || c.replayOf !== undefined) return undefined;
  const named = fieldValue(c.head.headers);
  const note: NotePhases = {};
  if (named !== undefined && named !== "") note.request = { rules: named.split(", ").map((name) => rulesOf(notes).get(name) ?? { rule: name, actions: [] }) };
  if (notes.response !== undefined && notes.response.length > 0) note.response = { rules: notes.response };
  if (notes.events !== undefined && notes.events.length > 0) note.events = { rules: notes.events };
  return note.request || note.response || note.events ? note : undefined;
}

function rulesOf(notes: DerivedNotes): Map<string, PhaseNote["rules"][number]> {
  let rules = byName.get(notes);
  if (rules === undefined) {
    rules = new Map(notes.request.map((r) => [fieldName(r.rule), r]));
    byName.set(notes, rules);
  }
  return rules;
}

function fieldValue(headers: HeaderList | undefined): string | undefined {
  return headers?.find(([n]) => n.toLowerCase() === POLICY_RULES_FIELD)?.[1];
}
