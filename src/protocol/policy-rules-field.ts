/**
 * How the request the agent gets names the tunnel's own rules that matched
 * it, in X-Burrow-Policy-Rules (edge/traffic-policy/layered-run.ts): each
 * rule's name as the field spells it, so the agent can tell which of its
 * rules a name is (agent/inspector/made-note.ts) the way the edge wrote it.
 */

/** A name's length at most, in the field. */
const MAX_NAME = 100;

/** `rule` (a rule's name, or `#N`) as the field spells it: printable, its commas (the field's separator) taken out, cut to its length. */
export function fieldName(rule: string): string {
  return rule.slice(0, MAX_NAME).replace(/[^\x20-\x7e]|,/g, "?").trim();
}
