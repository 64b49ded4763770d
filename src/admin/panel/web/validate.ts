/**
 * Form checks before sending, with the server's own rules (validate/fields.ts,
 * the same valibot schemas the API validates with), and the server's field
 * error placed beside its field after.
 */
import * as v from "valibot";
import * as f from "../../../validate/fields.ts";

export { PROTOCOLS, ROLES, TRAFFIC_PERIODS } from "../../../validate/fields.ts";

export type Errors = Record<string, string | undefined>;

/** The first broken rule of `schema` for `value`, in words, or undefined. */
export function check(schema: v.GenericSchema, value: unknown): string | undefined {
  const result = v.safeParse(schema, value);
  return result.success ? undefined : result.issues[0]?.message;
}

export const rules = {
  username: f.username,
  password: f.password,
  subdomain: f.subdomain,
  limit: f.limit,
  cidrs: f.cidrList,
  deviceName: v.pipe(v.string(), v.trim(), v.minLength(1, "must not be empty"), v.maxLength(100, "must be at most 100 characters")),
};

/** A whole non-negative number typed into a field ("" counts as 0: no limit). */
export function parseLimit(text: string): number | undefined {
  const t = text.trim();
  if (t === "") return 0;
  if (!/^[0-9]+$/.test(t)) return undefined;
  const n = Number(t);
  return Number.isSafeInteger(n) ? n : undefined;
}

/**
 * Which field a server error is about: messages name their field first
 * ("max_tunnels must not be negative ...", "username 'bob' is already taken").
 */
export function fieldOfServerError(message: string, fields: readonly string[]): string | undefined {
  return fields.find((name) => message.startsWith(`${name} `));
}
