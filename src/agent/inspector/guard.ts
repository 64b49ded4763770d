/**
 * What keeps the inspector's secrets (cookies, Authorization headers,
 * bodies) on this machine and in its own pages:
 *
 * - Host must name the inspector itself (127.0.0.1, localhost or [::1] and
 *   its port, or the address it was told to listen on). A page on another
 *   name that its DNS points here afterwards (DNS rebinding) is its own
 *   origin to the browser, and could otherwise read every capture.
 * - Writes (replay, clear) from another site's page are refused, as the
 *   admin panel refuses them (Sec-Fetch-Site, then Origin).
 * - Every answer forbids framing and sniffing; pages get the panel's CSP.
 */
import { parseHost } from "../../http/request-target.ts";
import { isLoopback, type ListenAddress } from "./address.ts";
import { InspectorError } from "./errors.ts";

export { CONTENT_SECURITY_POLICY, SECURITY_HEADERS } from "../../http/security-headers.ts";

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);
const ACCEPTED_FETCH_SITES = new Set(["same-origin", "none"]);
const WILDCARDS = new Set(["0.0.0.0", "::", "[::]"]);
const IPV4 = /^[0-9]{1,3}(\.[0-9]{1,3}){3}$/;

/** Whether a Host header names the inspector listening at `bound` (the port it really got). */
export function isOwnHost(raw: string | null, bound: ListenAddress): boolean {
  const host = parseHost(raw);
  if (!host) return false;
  if ((host.port ?? 80) !== bound.port) return false;
  const name = host.hostname.replace(/^\[|\]$/g, "");
  if (isLoopback(name)) return true;
  const listening = bound.host.toLowerCase();
  if (name === listening) return true;
  // listening on every address: any address of this machine may be typed, but never a name,
  // which is what a rebinding page needs
  return WILDCARDS.has(listening) && (IPV4.test(name) || host.hostname.startsWith("["));
}

/** Why a request must be refused before it reaches a route, or undefined. */
export function refusal(req: Request, bound: ListenAddress): InspectorError | undefined {
  if (!isOwnHost(req.headers.get("host"), bound)) {
    return new InspectorError("HOST_REFUSED", "the Host header does not name this inspector; open it at the address the agent printed");
  }
  if (!WRITES.has(req.method)) return undefined;
  const site = req.headers.get("sec-fetch-site")?.trim().toLowerCase();
  if (site !== undefined && !ACCEPTED_FETCH_SITES.has(site)) return crossSite();
  const origin = req.headers.get("origin");
  if (origin === null) return undefined; // a script (curl), not a page: not a confused deputy
  let originHost: string | undefined;
  try {
    const url = new URL(origin);
    originHost = url.protocol === "http:" || url.protocol === "https:" ? url.host.toLowerCase() : undefined;
  } catch {
    originHost = undefined;
  }
  return originHost !== undefined && originHost === req.headers.get("host")?.toLowerCase() ? undefined : crossSite();
}

const crossSite = () => new InspectorError("CROSS_SITE", "cross-site request refused");
