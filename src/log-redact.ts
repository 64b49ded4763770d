/**
 * The logger's safety net: no code path should hand it a secret, and if one
 * does, the line still does not carry it. Two checks, both cheap enough for
 * every field of every line (lines are never on a hot path):
 *
 * - by name: a field whose name has a word like token, password, cookie,
 *   authorization, secret or key loses its text (`[redacted]`). Numbers and
 *   booleans pass: `token=5` is a token's id, not the token.
 * - by shape, in any text: burrow's token and admin key secrets (`brw_…`,
 *   `brk_…`), webhook signing secrets (`whsec_…`), an `Authorization`
 *   scheme's credentials (`Bearer …`, `Basic …`) and the admin session
 *   cookie's value are cut out, whatever the field.
 */

export const REDACTED = "[redacted]";

/** Words that make a field's name a secret's. */
const SECRET_WORDS = new Set([
  "token",
  "password",
  "passwd",
  "passphrase",
  "secret",
  "cookie",
  "authorization",
  "credential",
  "credentials",
  "key",
  "apikey",
]);

/** `metricsToken`, `metrics_token`, `Set-Cookie`, `api-key` -> their words. */
function words(name: string): string[] {
  return name
    .replace(/([a-z0-9])([A-Z])/g, "$1 $2")
    .toLowerCase()
    .split(/[^a-z0-9]+/)
    .filter((w) => w !== "");
}

const nameCache = new Map<string, boolean>();

export function isSecretName(name: string): boolean {
  let secret = nameCache.get(name);
  if (secret === undefined) {
    secret = words(name).some((w) => SECRET_WORDS.has(w) || w.endsWith("token") || w.endsWith("password"));
    // field names come from the code, a bounded set; the cap is only a guard
    if (nameCache.size < 1000) nameCache.set(name, secret);
  }
  return secret;
}

const SHAPES: [RegExp, string][] = [
  // tokens (core/tokens.ts) and admin keys: a prefix and base62
  [/\b(br[wk]_)[0-9A-Za-z]{4,}/g, `$1${REDACTED}`],
  // webhook and admission hook signing secrets (core/events/signing.ts): a prefix and base64
  [/\b(whsec_)[0-9A-Za-z+/=]{4,}/g, `$1${REDACTED}`],
  // what follows an Authorization scheme, in a header echoed into a message; not the words
  // "basic auth" of a message (base64 "auth" decodes to no user:password, so no credential is that word)
  [/\b(Bearer|Basic)\s+(?!auth\b)[^\s",;]+/gi, `$1 ${REDACTED}`],
  // the admin session cookie (admin/auth.ts SESSION_COOKIE)
  [/(tunnel_admin_session=)[^;\s",]+/g, `$1${REDACTED}`],
];

/**
 * A URL as it may be shown in a message: its password, if it has one
 * (`http://user:secret@proxy:3128`), replaced by `***`. Works on text that
 * does not parse as a URL too, since that is when it is shown.
 */
export function hidePassword(raw: string): string {
  // up to the last @ before the path: a password may hold an @ that was not escaped
  return raw.replace(/^([^/?#]*\/\/[^/?#@:]*):[^/?#]*@/, "$1:***@");
}

/** Text with every secret-shaped part cut out. */
export function redactText(text: string): string {
  let out = text;
  for (const [shape, replacement] of SHAPES) {
    shape.lastIndex = 0;
    if (shape.test(out)) out = out.replace(shape, replacement);
  }
  return out;
}

/** A field's value as a log line may carry it. */
export function redactField(name: string, value: unknown): unknown {
  if (value === null || typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return value;
  if (isSecretName(name)) return REDACTED;
  if (typeof value === "string") return redactText(value);
  if (typeof value === "object") return redactObject(value as object, 0);
  return value;
}

/** Objects and arrays in a field (rare): their members by the same rules, a few levels deep. */
function redactObject(value: object, depth: number): unknown {
  if (depth > 4) return REDACTED;
  if (Array.isArray(value)) return value.map((v) => (typeof v === "string" ? redactText(v) : v && typeof v === "object" ? redactObject(v, depth + 1) : v));
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (v === null || typeof v === "number" || typeof v === "boolean") out[k] = v;
    else if (isSecretName(k)) out[k] = REDACTED;
    else if (typeof v === "string") out[k] = redactText(v);
    else if (typeof v === "object") out[k] = redactObject(v, depth + 1);
    else out[k] = v;
  }
  return out;
}
