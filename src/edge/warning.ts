/**
 * The browser warning interstitial: the first visit of a browser to a
 * tunnel sees who serves it, and continues through a link that sets a
 * per-host cookie for 24 hours.
 */
import { warningPage } from "./pages.ts";
import type { Tunnel } from "./registry.ts";

export const WARNING_COOKIE = "burrow_skip_warning";
export const WARNING_COOKIE_MAX_AGE_S = 24 * 3600;
export const CONTINUE_PATH = "/_burrow/continue";
export const SKIP_HEADER = "x-burrow-skip-warning";

/** What the warning reads of a request: its method and fields (a name's values joined, null when absent). */
export interface HeadView {
  method: string;
  /** `name` in lower case. */
  get(name: string): string | null;
}

function isBrowser(req: HeadView): boolean {
  return (req.get("user-agent") ?? "").includes("Mozilla") && (req.get("accept") ?? "").includes("text/html");
}

function hasCookie(req: HeadView): boolean {
  return (req.get("cookie") ?? "").split(";").some((c) => c.trim().startsWith(`${WARNING_COOKIE}=`));
}

/**
 * Whether this request is due the warning. Another node's tunnel (a
 * stand-in) is asked without its skip_warning: its own node, which shows the
 * warning, says whether it skips it, as it is now (an admin may have turned
 * it off since the stand-in was made).
 */
export function warningDue(req: HeadView, tunnel: Tunnel): boolean {
  if (tunnel.skipWarning && !tunnel.relayed) return false;
  if (req.method === "OPTIONS" || req.get(SKIP_HEADER) !== null) return false;
  if ((req.get("upgrade") ?? "").toLowerCase() === "websocket") return false;
  return isBrowser(req) && !hasCookie(req);
}

/** The warning page for a visit to `target` (path and query) of `username`'s tunnel at `host`. */
export function warningFor(host: string, username: string, target: string): Response {
  return warningPage(host, username, `${CONTINUE_PATH}?to=${encodeURIComponent(target)}`);
}

/** GET /_burrow/continue?to=/path: sets the cookie and goes on (only to a path on this host). */
export function continueResponse(url: URL, secure: boolean): Response {
  const to = localPath(url.searchParams.get("to"));
  const cookie = [`${WARNING_COOKIE}=1`, "Path=/", `Max-Age=${WARNING_COOKIE_MAX_AGE_S}`, "HttpOnly", "SameSite=Lax"];
  if (secure) cookie.push("Secure");
  return new Response(null, { status: 302, headers: { Location: to, "Set-Cookie": cookie.join("; "), "Cache-Control": "no-store" } });
}

/**
 * `to` as a path on this host, or "/". Resolved the way a browser resolves a
 * Location, so "//host", "/\\host" and "/<tab>/host" (browsers drop tabs and
 * newlines) cannot lead off the tunnel's host.
 */
function localPath(to: string | null): string {
  if (!to?.startsWith("/")) return "/";
  const base = "http://burrow.invalid";
  try {
    const resolved = new URL(to, base);
    return resolved.origin === base ? resolved.pathname + resolved.search + resolved.hash : "/";
  } catch {
    return "/";
  }
}
