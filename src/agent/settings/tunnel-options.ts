/**
 * A tunnel's settings as a person writes them, checked once for both places
 * they come from: the flags of `burrow http` / `burrow tcp` and the tunnels
 * of burrow.yml. Each check throws a UsageError whose message reads after
 * the flag or field's name.
 */
import type { LocalTarget } from "../http.ts";
import { basicAuthProblem, cidrProblem, emailRuleProblem, headerProblem, issuerProblem } from "../../validate/access.ts";
import { UPGRADE_TOKEN, type HttpAccess, type TcpAccess, type TunnelRequest } from "../../protocol/messages.ts";
import { UsageError } from "../../usage-error.ts";
import { parsePrefix, type PathRoute } from "../routes.ts";
import { normalizeHostname } from "../../validate/hostname.ts";

/** "3000", "localhost:3000", "[::1]:3000", "http://host:3000" -> where the local service is. */
export function parseTarget(raw: string | undefined, allowScheme: boolean): LocalTarget {
  if (raw === undefined) throw new UsageError("missing the local port, e.g. 3000 or localhost:3000");
  let rest = raw;
  let tls = false;
  const scheme = /^([a-z]+):\/\//i.exec(raw);
  if (scheme) {
    if (!allowScheme || !["http", "https"].includes(scheme[1]!.toLowerCase())) throw new UsageError(`'${raw}' is not PORT or HOST:PORT`);
    tls = scheme[1]!.toLowerCase() === "https";
    rest = raw.slice(scheme[0].length).replace(/\/.*$/, "");
  }
  const m = /^(?:(\[[0-9a-f:.]+\]|[a-z0-9.-]+):)?([0-9]{1,5})$/i.exec(rest);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535) throw new UsageError(`'${raw}' is not PORT or HOST:PORT (port 1-65535)`);
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : "localhost";
  return { host, port, tls };
}

/** Seconds the edge should wait for the local service's answer: 0.1 to 86400. */
export function parseResponseTimeout(raw: string): number {
  const seconds = /^[0-9]{1,5}(\.[0-9]+)?$/.test(raw) ? Number(raw) : Number.NaN;
  if (!(seconds >= 0.1 && seconds <= 86_400)) throw new UsageError(`must be a number of seconds from 0.1 to 86400 (got '${raw}')`);
  return seconds;
}

/** The public TCP port asked for: 1 to 65535. */
export function parseRemotePort(raw: string): number {
  const port = Number(raw);
  if (!/^[0-9]{1,5}$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`must be a port number from 1 to 65535 (got '${raw}')`);
  return port;
}

/** A pool member's health check: GET of a path of the service (2xx or 3xx is healthy), or "tcp": a connect. */
export function parseHealthCheck(raw: string): string {
  if (raw !== "tcp" && !/^\/[\x21-\x7e]*$/.test(raw)) throw new UsageError(`must be a path such as /healthz, or tcp (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 60)}')`);
  return raw;
}

/** Seconds between a pool member's health checks: 1 to 3600. */
export function parseHealthInterval(raw: string): number {
  const seconds = /^[0-9]{1,4}$/.test(raw) ? Number(raw) : NaN;
  if (!(seconds >= 1 && seconds <= 3600)) throw new UsageError(`must be a whole number of seconds from 1 to 3600 (got '${raw.slice(0, 40)}')`);
  return seconds;
}

/** How a pool spreads its requests or connections. */
export function parsePoolBalance(raw: string): "round-robin" | "least-requests" {
  if (raw !== "round-robin" && raw !== "least-requests") throw new UsageError(`must be round-robin or least-requests (got '${raw.slice(0, 40)}')`);
  return raw;
}

/** "/api=8080", "/ws=127.0.0.1:9000", "/old=https://localhost:8443": a path route (agent/routes.ts). */
export function parseRoute(raw: string): PathRoute {
  const eq = raw.indexOf("=");
  if (eq < 0) throw new UsageError(`must be PATH=PORT, PATH=HOST:PORT or PATH=URL, such as /api=8080 (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 80)}')`);
  return { prefix: parsePrefix(raw.slice(0, eq)), target: parseTarget(raw.slice(eq + 1), true) };
}

/** How the agent speaks to an http tunnel's service: http1 (HTTP/1.1), h2c (HTTP/2 with prior knowledge) or h2 (HTTP/2 over TLS). */
export function parseUpstreamProtocol(raw: string): "http1" | "h2c" | "h2" {
  const value = raw.trim().toLowerCase();
  if (value === "http1" || value === "h2c" || value === "h2") return value;
  throw new UsageError(`must be http1, h2c or h2 (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 40)}')`);
}

/** An Upgrade protocol name for --allow-upgrade: a token without a version ("h2c"), in lower case. */
export function parseUpgradeToken(raw: string): string {
  const token = raw.trim().toLowerCase();
  if (!UPGRADE_TOKEN.test(token)) throw new UsageError(`must be a protocol name as Upgrade says it, such as h2c (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 80)}')`);
  return token;
}

/**
 * The protocols besides websocket an http tunnel's requests may switch to:
 * asked of the edge (HELLO), which takes any other off its visitors'
 * requests, and kept by the agent, which does the same for what it sends
 * its service (a private tunnel's connectors' requests included) and pipes
 * only after a 101 that answers what was asked.
 */
export function allowUpgrades(request: Extract<TunnelRequest, { protocol: "http" }>, target: LocalTarget, tokens: readonly string[]): void {
  const unique = [...new Set(tokens)];
  if (unique.length === 0) return;
  if (unique.length > ACCESS_LIST_MAX.allow_upgrade!) throw new UsageError(tooManyEntries(ACCESS_LIST_MAX.allow_upgrade!, unique.length));
  request.allowUpgrade = unique;
  target.allowUpgrade = new Set(unique);
}

/** A tunnel's custom hostname (demo.acme.com): one DNS name, kept form (validate/hostname.ts); a wildcard is the registration's, not a tunnel's. */
export function parseTunnelHostname(raw: string): string {
  const checked = normalizeHostname(raw);
  if ("problem" in checked) throw new UsageError(checked.problem);
  if (checked.hostname.startsWith("*.")) throw new UsageError(`must be one name, such as ${checked.hostname.slice(2)} or a name under it, not a wildcard`);
  return checked.hostname;
}

/** 'rewrite' or a host name; never empty. */
export function parseHostHeader(raw: string): string {
  if (raw.trim() === "") throw new UsageError("needs 'rewrite' or a host name");
  // sent as the Host line of every request to the local service: a space, a line break or
  // a non-ASCII letter would make that request malformed, or add header lines of its own
  if (raw !== "rewrite" && !HOST_VALUE.test(raw)) {
    throw new UsageError(`needs 'rewrite' or a host name such as example.com or example.com:8080 (got '${raw.replace(/[\x00-\x1f\x7f-\x9f]/g, "?")}')`);
  }
  return raw;
}

/** A Host header's value: a name, IPv4 address or [IPv6] address (RFC 3986's characters, ASCII), and an optional port. */
const HOST_VALUE = /^(?:[A-Za-z0-9\-._~!$&'()*+,;=%]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;

/** USER:PASS, split at the first ':' (a password may hold more). Never quoted back: it is a secret. */
export function parseBasicAuth(raw: string): { user: string; password: string } {
  const colon = raw.indexOf(":");
  if (colon < 0) throw new UsageError("must be USER:PASS");
  const cred = { user: raw.slice(0, colon), password: raw.slice(colon + 1) };
  const problem = basicAuthProblem(cred);
  if (problem) throw new UsageError(problem);
  return cred;
}

/** An IPv4 or IPv6 CIDR or single address. */
export function parseCidr(raw: string): string {
  const problem = cidrProblem(raw);
  if (problem) throw new UsageError(problem);
  return raw.trim();
}

/** "Name: value". The value is never quoted back (it may be a credential). */
export function parseHeaderLine(raw: string): [string, string] {
  const colon = raw.indexOf(":");
  if (colon <= 0) throw new UsageError("must be 'Name: value'");
  const pair: [string, string] = [raw.slice(0, colon).trim(), raw.slice(colon + 1).trim()];
  const problem = headerProblem(pair[0], pair[1]);
  if (problem) throw new UsageError(problem);
  return pair;
}

export function parseHeaderName(raw: string): string {
  const problem = headerProblem(raw.trim());
  if (problem) throw new UsageError(problem);
  return raw.trim();
}

/** "a@b.com" or "@domain.com". */
export function parseEmailRule(raw: string): string {
  const problem = emailRuleProblem(raw.trim());
  if (problem) throw new UsageError(problem);
  return raw.trim();
}

export function parseIssuer(raw: string): string {
  const problem = issuerProblem(raw.trim());
  if (problem) throw new UsageError(problem);
  return raw.trim();
}

/** A tunnel's OIDC settings as written: all three of issuer, client id and secret, or none. */
export function oidcSettings(
  o: { issuer?: string; clientId?: string; clientSecret?: string; allowEmails?: string[] },
  names: { issuer: string; clientId: string; clientSecret: string; allowEmails: string },
): NonNullable<HttpAccess["oidc"]> | undefined {
  const given = [o.issuer, o.clientId, o.clientSecret].filter((x) => x !== undefined).length;
  if (given === 0) {
    if (o.allowEmails?.length) throw new UsageError(`${names.allowEmails} needs ${names.issuer}, ${names.clientId} and ${names.clientSecret}`);
    return undefined;
  }
  if (o.issuer === undefined) throw new UsageError(`OIDC needs ${names.issuer}`);
  if (o.clientId === undefined || o.clientId === "") throw new UsageError(`${names.issuer} needs ${names.clientId}`);
  if (o.clientSecret === undefined || o.clientSecret === "") throw new UsageError(`${names.issuer} needs ${names.clientSecret}`);
  return { issuer: o.issuer, clientId: o.clientId, clientSecret: o.clientSecret, ...(o.allowEmails?.length ? { allowEmails: o.allowEmails } : {}) };
}

/** The settings without the lists left empty, or undefined when nothing is asked. */
/**
 * How many entries each list of access rules may have: what the protocol
 * carries (protocol/messages.ts), checked here so that a longer list is a
 * mistake of the flag or the file's line rather than a refused handshake.
 * Keyed by the burrow.yml key; the flags are the same names with dashes.
 */
export const ACCESS_LIST_MAX: Record<string, number> = {
  basic_auth: 64,
  allow_cidr: 256,
  deny_cidr: 256,
  request_header_add: 64,
  request_header_remove: 64,
  response_header_add: 64,
  allow_emails: 256,
  // not an access rule, but a list the protocol carries as well
  allow_upgrade: 16,
};

/** The message for a list longer than ACCESS_LIST_MAX allows. */
export function tooManyEntries(max: number, got: number): string {
  return `at most ${max} entries (got ${got})`;
}

export function compactAccess<T extends HttpAccess | TcpAccess>(access: T): T | undefined {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(access)) if (v !== undefined && (!Array.isArray(v) || v.length > 0)) out[k] = v;
  return Object.keys(out).length > 0 ? (out as T) : undefined;
}
