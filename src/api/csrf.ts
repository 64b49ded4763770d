/**
 * Cross-site request refusal for state-changing admin requests (POST, PUT,
 * DELETE). The session cookie is SameSite=Lax, which already keeps it off
 * cross-site subrequests; this is the second lock, and the one that also
 * covers *same-site* pages: tunnels live on subdomains of the admin's own
 * site, so a page a user serves through a tunnel must not drive the panel.
 *
 * A browser says where a request comes from (Origin, Sec-Fetch-Site); a
 * script such as `curl -X DELETE -b jar` says nothing and passes, because a
 * script holding the cookie is not a confused deputy.
 *
 * Requests made with an admin API key (`Authorization: Bearer brk_...`)
 * and no cookie at all are not checked here (app.ts skips this check for
 * them). Cross-site
 * forgery needs a credential the browser adds by itself, and a key is not
 * one: a page can only send a key it already holds, and then it needs no
 * one's browser; nor can a page on another origin add an Authorization
 * header without a CORS preflight, which this server never grants. What
 * keeps this sound is that the key *is* the request's credential, alone:
 * - a request with a Bearer credential is judged by that key only: an
 *   unknown, revoked or expired key is 401 even when a valid session
 *   cookie rides along, so a Bearer header can never carry a cookie past
 *   this check;
 * - a request with a key that also carries a cookie is checked here all
 *   the same: a script has no reason to send both, a browser sends cookies
 *   by itself, and the check costs a same-origin page nothing;
 * - a request with no key (or an Authorization header of another scheme,
 *   such as Basic, which a browser may add by itself) is a cookie request
 *   and is checked here as always;
 * - the routes that need no credentials (login) ignore the header and are
 *   checked as always.
 */
import { AppError } from "../core/errors.ts";

export const STATE_CHANGING = new Set(["POST", "PUT", "DELETE", "PATCH"]);

/** Sec-Fetch-Site values that are not cross-site; "same-site" is then judged by Origin. */
const ACCEPTED_FETCH_SITES = new Set(["same-origin", "same-site", "none"]);

export const crossSiteRefused = () => new AppError("FORBIDDEN", "cross-site request refused");

/** Why a request must be refused, or undefined when it may go on. */
export function checkCrossSite(req: Request): AppError | undefined {
  if (!STATE_CHANGING.has(req.method)) return undefined;
  const fetchSite = req.headers.get("sec-fetch-site");
  if (fetchSite !== null && !ACCEPTED_FETCH_SITES.has(fetchSite.trim().toLowerCase())) return crossSiteRefused();
  const origin = req.headers.get("origin");
  if (origin === null) return undefined;
  const originHost = hostOf(origin);
  if (originHost === undefined) return crossSiteRefused(); // "null" (sandboxed frame, file://) or garbage
  // behind a reverse proxy that rewrites Host, the original one travels as X-Forwarded-Host;
  // a cross-site page cannot set that header without a CORS preflight this server never grants
  const hosts = [req.headers.get("host"), req.headers.get("x-forwarded-host")?.split(",")[0]]
    .filter((h): h is string => Boolean(h))
    .map((h) => h.trim().toLowerCase());
  return hosts.includes(originHost) ? undefined : crossSiteRefused();
}

/** "http://Admin.Example:4041" -> "admin.example:4041"; undefined when not an http(s) origin. */
function hostOf(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.protocol === "http:" || url.protocol === "https:" ? url.host.toLowerCase() : undefined;
  } catch {
    return undefined;
  }
}
