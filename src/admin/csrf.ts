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
