/**
 * Secrets taken out of what a support bundle carries (the agent's log, its
 * config file): more than the logger's own net (log-redact.ts), since a log
 * file may hold anything that was printed, a service's output included.
 *
 * - burrow's tokens and admin keys, Authorization credentials, the admin
 *   session cookie (log-redact.ts's shapes);
 * - a URL's password (http://user:[redacted]@proxy:3128);
 * - the value of a header that carries credentials (Cookie, Set-Cookie,
 *   Authorization, Proxy-Authorization), to the end of its line;
 * - the value after a name with a secret's words (token, password, secret,
 *   cookie, key, credential, basic_auth, client_secret), as `name=value`,
 *   `name: value` or `"name": "value"`;
 * - in a config file, the value of every such field, whatever its shape.
 * It masks too much rather than too little: `token=5` (an id) loses its 5.
 */
import { parse, stringify } from "yaml";
import { isSecretName, REDACTED, redactText } from "../../log-redact.ts";

const URL_PASSWORD = /\b([a-z][a-z0-9+.-]*:\/\/[^\s/?#@:"']*):[^\s/?#@"']*@/gi;
const CREDENTIAL_HEADER = /^(.*?\b(?:set-cookie|cookie|proxy-authorization|authorization)\s*:\s*).+$/gim;
const SECRET_NAME = "[A-Za-z0-9_.-]*(?:token|password|passwd|passphrase|secret|cookie|authorization|credentials?|api[_-]?key|private[_-]?key|basic[_-]?auth)[A-Za-z0-9_.-]*";
/** name=value, name: value, "name": "value", name="value" (the value a quoted string, or up to a space, comma, semicolon or brace). */
const SECRET_FIELD = new RegExp(`((["']?)${SECRET_NAME}\\2\\s*[:=]\\s*)("(?:[^"\\\\]|\\\\.)*"|'[^']*'|[^\\s,;}&]+)`, "gi");

/** Text (a log) with every secret-shaped part replaced by [redacted]. */
export function maskText(text: string): string {
  return redactText(text)
    .replace(URL_PASSWORD, `$1:${REDACTED}@`)
    .replace(CREDENTIAL_HEADER, `$1${REDACTED}`)
    .replace(SECRET_FIELD, (_, lead: string, _q: string, value: string) => (value === REDACTED || value === `"${REDACTED}"` ? `${lead}${value}` : `${lead}${value.startsWith('"') ? `"${REDACTED}"` : REDACTED}`));
}

/** A name whose value is a secret in burrow.yml (basic_auth's user:password pairs, an OIDC client's secret, the token). */
const isConfigSecret = (name: string) => isSecretName(name) || /^(basic_auth|basicauth|client_secret)$/i.test(name);

/** A config file (YAML) with the secrets' values masked; text that is not YAML is masked as text. */
export function maskConfig(text: string): string {
  let doc: unknown;
  try {
    doc = parse(text);
  } catch {
    return maskText(text);
  }
  return stringify(maskValue(doc, false));
}

function maskValue(value: unknown, secret: boolean): unknown {
  if (secret && value !== null && value !== undefined && typeof value !== "boolean") return REDACTED;
  if (typeof value === "string") return maskText(value);
  if (Array.isArray(value)) return value.map((v) => maskValue(v, false));
  if (value && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, maskValue(v, isConfigSecret(k))]));
  return value;
}
