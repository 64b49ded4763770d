/**
 * Path routes: one http tunnel, several local services. `--route
 * /api=8080` sends every request whose path is /api or under /api/ to that
 * service; the longest matching prefix wins, the path goes on as it was
 * matched, and what no route takes goes to the tunnel's own address. A
 * WebSocket upgrade follows its route like any request.
 *
 * Paths are matched in their normal form (http/request-path.ts: the one the
 * edge judged and the service is sent), so `/api/../secret` is /secret and
 * never the /api route's; a prefix is made normal the same way. Prefixes
 * match whole path segments: /api takes /api, /api/ and /api/v1, never
 * /apis; the query is not part of the path. Two routes that say the same
 * prefix (/api and /api/) are a mistake, as is a route for / (that is the
 * tunnel's own address).
 */
import { normalTarget } from "../http/request-path.ts";
import { UsageError } from "../usage-error.ts";
import type { LocalTarget } from "./local-target.ts";

export interface PathRoute {
  /** As matched: starts with /, no trailing / (it says the same as without). */
  prefix: string;
  target: LocalTarget;
}

/** Longest a prefix may be. */
const MAX_PREFIX = 1024;
/** Routes one tunnel may have. */
export const MAX_ROUTES = 64;
/** A path prefix: visible ASCII, no query or fragment, no '=' (it ends the prefix in PREFIX=ADDRESS). */
const PREFIX = /^\/[\x21-\x7e]*$/;

/** "/api" as a route's prefix: checked and made canonical (its path's normal form, no trailing /). */
export function parsePrefix(raw: string): string {
  const shown = raw.replace(/[^\x21-\x7e]/g, "?").slice(0, 60);
  if (!PREFIX.test(raw) || raw.length > MAX_PREFIX || /[?#=]/.test(raw)) {
    throw new UsageError(`the path '${shown}' must start with / and hold no spaces, ?, # or = (at most ${MAX_PREFIX} characters)`);
  }
  const normal = normalTarget(raw);
  if (typeof normal !== "string") throw new UsageError(`the path '${shown}' can match no request: ${normal.why.replace(/^The request path/, "it").replace(/\.$/, "")}`);
  const prefix = normal.replace(/\/+$/, "");
  if (prefix === "") throw new UsageError("a route for / is the tunnel's own address: give that as the tunnel's PORT");
  return prefix;
}

/**
 * Checks a tunnel's routes together: none twice (/api and /api/ are the
 * same), not more than MAX_ROUTES. Returns them longest first, the order
 * they are matched in.
 */
export function checkRoutes(routes: PathRoute[]): PathRoute[] {
  if (routes.length > MAX_ROUTES) throw new UsageError(`at most ${MAX_ROUTES} routes a tunnel (got ${routes.length})`);
  const seen = new Set<string>();
  for (const r of routes) {
    if (seen.has(r.prefix)) throw new UsageError(`the route ${r.prefix} is given twice (a trailing / says the same path)`);
    seen.add(r.prefix);
  }
  return [...routes].sort((a, b) => b.prefix.length - a.prefix.length);
}

/** The route a request target (path and query, the path normal) goes by, or undefined for the tunnel's own address. */
export function routeFor(routes: readonly PathRoute[], requestTarget: string): PathRoute | undefined {
  const q = requestTarget.search(/[?#]/);
  const path = q < 0 ? requestTarget : requestTarget.slice(0, q);
  for (const r of routes) {
    if (path.startsWith(r.prefix) && (path.length === r.prefix.length || path.charCodeAt(r.prefix.length) === 47 /* "/" */)) return r;
  }
  return undefined;
}
