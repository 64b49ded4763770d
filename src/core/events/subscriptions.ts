/**
 * Which events a webhook wants: its list of types and patterns (`*`, every
 * event; `tunnel.*`, every type under `tunnel.`; or a type), and whose: an
 * admin's webhook gets every event it names, a user's own only the types
 * about users (EVENT_CATALOGUE's `user`) that concern that user.
 */
import { EVENT_CATALOGUE, EVENT_TYPES, type EventType } from "./catalogue.ts";

/** The subjects of the catalogue ("tunnel", "token", ...): what a `<subject>.*` pattern may name. */
export const EVENT_SUBJECTS = [...new Set(EVENT_TYPES.map((t) => t.split(".")[0]!))];

/** Why a pattern names no event, or undefined when it is one burrow knows. */
export function patternProblem(pattern: string, forUser: boolean): string | undefined {
  const types = typesOf(pattern);
  if (types.length === 0) return `'${pattern.slice(0, 100)}' is not an event type or pattern (*, ${EVENT_SUBJECTS.map((s) => `${s}.*`).join(", ")} or a type of the catalogue)`;
  if (forUser && !types.some((t) => EVENT_CATALOGUE[t].user)) return `'${pattern}' names no event about your own tunnels, tokens or quota`;
  return undefined;
}

/** The types a pattern names. */
export function typesOf(pattern: string): EventType[] {
  if (pattern === "*") return EVENT_TYPES;
  if (pattern.endsWith(".*")) {
    const subject = pattern.slice(0, -2);
    return EVENT_TYPES.filter((t) => t.startsWith(subject + "."));
  }
  return EVENT_TYPES.filter((t) => t === pattern);
}

export interface Subscriber {
  id: number;
  /** The webhook's list of types and patterns. */
  patterns: readonly string[];
  /** A user's own webhook: events about that user only. */
  userId: number | null;
}

/** Whether a webhook takes an event of `type` concerning `userId`. */
export function wants(s: Subscriber, type: EventType, userId: number | undefined): boolean {
  if (s.userId !== null && (userId !== s.userId || !EVENT_CATALOGUE[type].user)) return false;
  return s.patterns.some((p) => p === "*" || p === type || (p.endsWith(".*") && type.startsWith(p.slice(0, -1))));
}
