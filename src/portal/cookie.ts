/**
 * The portal's session cookie. Every subdomain of the server's domain is
 * someone else's code, so the cookie is host-only on the apex (no Domain),
 * Path=/, HttpOnly and SameSite=Lax; over HTTPS it is Secure and named with
 * the `__Host-` prefix, which a browser refuses to take with a Domain: no
 * tunnel can read it, nor plant one of that name in its place.
 *
 * Over plain HTTP a tunnel can still set a cookie of the plain name for the
 * parent domain ("cookie tossing"); the browser then sends two of that name
 * to the apex. Two are never guessed between: the request is signed out,
 * and both are cleared (the apex may clear its domain's cookies). A cookie
 * that is no session of ours (never issued, ended, expired) is signed out
 * and cleared the same way. What plain HTTP cannot tell apart is a tunnel's
 * planted cookie holding a real session of someone else's, alone: so the
 * portal over plain HTTP is for loopback only (the server says so at start).
 */
import { SESSION_MAX_AGE_MS } from "../core/sessions.ts";

export const SECURE_COOKIE = "__Host-burrow_portal";
export const PLAIN_COOKIE = "burrow_portal";

export const cookieName = (secure: boolean) => (secure ? SECURE_COOKIE : PLAIN_COOKIE);

export interface SessionCookie {
  /** The session's key, when exactly one cookie of the name came, in a session key's form. */
  key?: string;
  /** At least one cookie of the name came (a session's or not). */
  present: boolean;
  /** More than one came: one was planted by another name under the domain. */
  tossed: boolean;
}

/** The session cookie of a request, by the Cookie header's own words (every value of the name, not the last). */
export function readSessionCookie(req: Request, secure: boolean): SessionCookie {
  const name = cookieName(secure);
  const values: string[] = [];
  for (const header of (req.headers.get("cookie") ?? "").split(";")) {
    const eq = header.indexOf("=");
    if (eq < 0 || header.slice(0, eq).trim() !== name) continue;
    values.push(header.slice(eq + 1).trim());
  }
  if (values.length > 1) return { tossed: true, present: true };
  const key = values[0];
  // a key is randomKey()'s base64url: anything else is no session of ours
  return { key: key !== undefined && /^[A-Za-z0-9_-]{16,128}$/.test(key) ? key : undefined, tossed: false, present: key !== undefined };
}

/** Set-Cookie for a session's key, or (value "") clearing it. */
export function sessionCookie(secure: boolean, value: string): string {
  const maxAge = value === "" ? 0 : SESSION_MAX_AGE_MS / 1000;
  const parts = [`${cookieName(secure)}=${value}`, "Path=/", "HttpOnly", "SameSite=Lax", `Max-Age=${maxAge}`];
  if (secure) parts.push("Secure");
  return parts.join("; ");
}

/** The Set-Cookie fields that clear a tossed or planted cookie: the host-only one, and over plain HTTP one set for the domain (a `__Host-` cookie cannot have one). */
export function clearTossed(secure: boolean, domain: string): string[] {
  const hostOnly = sessionCookie(secure, "");
  return secure ? [hostOnly] : [hostOnly, `${cookieName(secure)}=; Domain=${domain}; Path=/; Max-Age=0`];
}
