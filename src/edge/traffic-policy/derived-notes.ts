/**
 * POLICY_PASSED notes the agent can make itself (messages.ts
 * DerivedNotes). The tunnel's own policy is the agent's: for most
 * requests its note says only which of the tunnel's own request rules
 * matched (named, in order, in the request's X-Burrow-Policy-Rules field:
 * layered-run.ts matchedNames) with their actions, and, when the
 * response's rules are known at load (TunnelPolicy.responseFields), all
 * of the tunnel's own response rules with theirs, and its event stream
 * rules (on_event_stream_message) when none has a condition. For an agent that said
 * it makes such notes (HELLO's `derived_notes`), the edge lists the rules
 * once, in READY's entry for the tunnel, and sends no note for such a
 * request: none is armed (passed-notes.ts toldWhenAnswered), so no note's
 * code runs when its response comes. Any other request's note is sent
 * whole.
 *
 * Whether a policy's notes can be made so is decided once a policy: each
 * request rule's name as the field spells it (protocol/policy-rules-field.ts)
 * must be one no other of its request rules has, and not empty, and there
 * must be no more request rules than the field names; the response rules,
 * if any, must be known at load, and the event stream rules, if any, have
 * no condition.
 */
import type { Policy } from "../../policy/index.ts";
import type { CompiledRule } from "../../policy/policy.ts";
import type { DerivedNotes } from "../../protocol/messages.ts";
import { fieldName } from "../../protocol/policy-rules-field.ts";

/** As passed-notes.ts caps a note's phase, and layered-run.ts the field's names. */
const MAX_RULES = 20;
const MAX_ACTIONS = 20;
const MAX_NAME = 100;
const MAX_TYPE = 64;

/** A policy's notes as the agent makes them, and whether a request rule of its logs (its notes then are checked for log fields). */
export interface NotesMade {
  readonly wire: DerivedNotes;
  readonly logs: boolean;
}

const made = new WeakMap<Policy, NotesMade | null>();

/** `own`'s rules as DerivedNotes lists them, when its notes can be made by the agent; undefined otherwise. Once a policy. */
export function notesMadeOf(own: Policy): NotesMade | undefined {
  let notes = made.get(own);
  if (notes === undefined) {
    notes = decide(own) ?? null;
    made.set(own, notes);
  }
  return notes ?? undefined;
}

function decide(own: Policy): NotesMade | undefined {
  const request = own.rulesOf("on_http_request");
  if (request.length > MAX_RULES) return undefined;
  const names = new Set<string>();
  for (const r of request) {
    const name = fieldName(r.label);
    if (name === "" || names.has(name)) return undefined;
    names.add(name);
  }
  const response = own.rulesOf("on_http_response");
  // a rule that is not known at load is run, and its note is what the run says
  for (const r of response) if (r.expressions.length > 0 || !r.actions.every((a) => a.constantFields !== undefined)) return undefined;
  // an event stream rule with no condition matches every response its phase runs for (its sse-find-replace goes on, never ends the run)
  const events = own.rulesOf("on_event_stream_message");
  if (events.some((r) => r.expressions.length > 0)) return undefined;
  const wire: DerivedNotes = { request: request.map(noteRule) };
  if (response.length > 0) wire.response = response.slice(0, MAX_RULES).map(noteRule);
  if (events.length > 0) wire.events = events.slice(0, MAX_RULES).map(noteRule);
  return { wire, logs: request.some((r) => r.actions.some((a) => a.type === "log")) };
}

/** A rule as a note names it (passed-notes.ts phaseNote). */
function noteRule(r: CompiledRule): DerivedNotes["request"][number] {
  return { rule: r.label.slice(0, MAX_NAME), actions: r.actions.slice(0, MAX_ACTIONS).map((a) => a.type.slice(0, MAX_TYPE)) };
}
