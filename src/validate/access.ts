/**
 * What a tunnel's access settings must look like, checked alike by the
 * agent (its flags and burrow.yml, before it connects) and by the server
 * (every HELLO, core/access.ts). Each check gives a sentence; none ever
 * repeats a password, a client secret or a header's value, which may be a
 * credential too. Pure: nothing of the server, so the agent can use it.
 */
import { isCidrOrAddress } from "../http/addresses.ts";
import type { HttpAccess, TcpAccess } from "../protocol/messages.ts";

/** RFC 9110 token: what a header name may be. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Visible characters, spaces and tabs: no CR, LF or NUL that would split a head. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/**
 * Headers a rule may not set or remove: the edge and HTTP own them (framing,
 * hop-by-hop, the Host the tunnel is chosen by, the forwarded chain and the
 * visitor's address, the signed-in identity).
 */
const MANAGED_HEADERS = new Set([
  "host",
  "connection",
  "content-length",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "keep-alive",
  "proxy-connection",
  "x-forwarded-for",
  "x-forwarded-proto",
  "x-forwarded-host",
  "x-real-ip",
  "forwarded",
  "x-burrow-user-email",
]);

/** The header the edge passes the signed-in visitor's email in (and strips from what visitors send). */
export const USER_EMAIL_HEADER = "x-burrow-user-email";

export function cidrProblem(text: string): string | undefined {
  return isCidrOrAddress(text.trim()) ? undefined : `'${text}' is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or 2001:db8::/32)`;
}

export function basicAuthProblem(cred: { user: string; password: string }): string | undefined {
  if (cred.user === "") return "a basic-auth user name is empty (USER:PASS)";
  if (cred.user.includes(":")) return "a basic-auth user name may not contain ':' (USER:PASS)";
  if (/[\x00-\x1f\x7f]/.test(cred.user)) return "a basic-auth user name has control characters";
  if (cred.password === "") return `the basic-auth password of '${cred.user}' is empty`;
  return undefined;
}

/** A header rule's name (and its value, never quoted back). */
export function headerProblem(name: string, value?: string): string | undefined {
  if (!TOKEN.test(name)) return `'${name}' is not a valid header name`;
  if (MANAGED_HEADERS.has(name.toLowerCase())) return `the header ${name} is set by the edge and cannot be changed by a rule`;
  if (value !== undefined && !HEADER_VALUE.test(value)) return `the value for header ${name} has line breaks or control characters`;
  return undefined;
}

/** "a@b.com" (one address) or "@domain.com" (anyone there). */
export function emailRuleProblem(rule: string): string | undefined {
  return /^[^@\s]*@[^@\s]+\.[^@\s]+$/.test(rule) ? undefined : `'${rule}' is neither an email address nor @domain`;
}

const LOOPBACK_HOSTS = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])$/;

/**
 * An endpoint a provider's metadata names, which the edge itself fetches
 * (its keys, its token endpoint): https, or plain http on loopback when
 * the server allows loopback issuers, as for the issuer itself.
 */
export function providerEndpointProblem(name: string, endpoint: string, httpLoopback: boolean): string | undefined {
  const url = URL.parse(endpoint);
  if (url?.protocol === "https:") return undefined;
  if (url?.protocol === "http:" && httpLoopback && LOOPBACK_HOSTS.test(url.hostname)) return undefined;
  return `its ${name} is not an https URL`;
}

/** An issuer is an https URL without query or fragment; plain http only on loopback (a provider on the same machine). */
export function issuerProblem(issuer: string): string | undefined {
  const url = URL.parse(issuer);
  // checked first, and the URL not quoted: what is there is a password, and refusals are logged
  if (url && (url.username !== "" || url.password !== "")) return "the issuer may not have a user or password in its URL";
  if (!url || (url.protocol !== "https:" && url.protocol !== "http:")) return `the issuer '${issuer}' is not an http(s) URL`;
  if (url.protocol === "http:" && !LOOPBACK_HOSTS.test(url.hostname)) return `the issuer '${issuer}' must be https (plain http only on loopback)`;
  if (url.search !== "" || url.hash !== "") return `the issuer '${issuer}' may not have a query or fragment`;
  return undefined;
}

/** Whether an http tunnel asks visitors to authenticate (what require_auth demands). */
export function hasAuthentication(access: HttpAccess | undefined): boolean {
  return (access?.basicAuth?.length ?? 0) > 0 || access?.oidc !== undefined;
}

/** Whether the settings ask for anything at all (an empty `access` is none). */
export function hasRules(access: HttpAccess | TcpAccess | undefined): boolean {
  if (!access) return false;
  return Object.values(access).some((x) => x !== undefined && (!Array.isArray(x) || x.length > 0));
}

