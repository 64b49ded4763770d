/** POST /api/auth/login, POST /api/auth/logout, GET /api/auth/me; the session cookie. */
import { checkLogin } from "../core/login.ts";
import { SESSION_MAX_AGE_MS } from "../core/sessions.ts";
import type { Route } from "./context.ts";
import { json, parseBody } from "../api/http.ts";
import { meJson } from "../api/json.ts";
import { LoginJson, MeJson, StatusBody } from "../api/responses.ts";
import { LoginBody } from "./schemas.ts";

export const SESSION_COOKIE = "tunnel_admin_session";

/** Secure when the admin reached us over HTTPS, directly or through a TLS-terminating proxy. */
function isHttps(req: Request): boolean {
  return new URL(req.url).protocol === "https:" || req.headers.get("x-forwarded-proto") === "https";
}

function sessionCookie(req: Request, value: string, maxAgeSeconds: number): string {
  const parts = [`${SESSION_COOKIE}=${value}`, "HttpOnly", "SameSite=Lax", "Path=/", `Max-Age=${maxAgeSeconds}`];
  if (isHttps(req)) parts.push("Secure");
  return parts.join("; ");
}

export const readSessionCookie = (req: Request & { cookies?: { get(name: string): string | null } }) =>
  req.cookies?.get(SESSION_COOKIE) ?? undefined;

/**
 * The credential of an `Authorization: Bearer <credential>` header (an admin
 * API key); undefined without one. A header of another scheme is not ours
 * and is left alone: the session cookie then decides, as always. A Bearer
 * header that is not one credential (none, or several words) is still a key
 * request, answered as a bad key: it must not fall back to the cookie.
 */
export function readBearer(req: Request): string | undefined {
  const header = req.headers.get("authorization");
  const match = header === null ? null : /^Bearer(?:[ \t]+(.*))?$/is.exec(header.trim());
  return match ? (match[1] ?? "").trim() : undefined;
}

export const authRoutes: Route[] = [
  {
    path: "/api/auth/login",
    public: true,
    methods: {
      async POST(req, { core, address, audit }) {
        const body = await parseBody(req, LoginBody);
        audit.actor = { username: body.username }; // who tried, for a failure's entry
        const user = await checkLogin(core.users, core.loginThrottle, address, body.username, body.password);
        audit.actor = { userId: user.id, username: user.username };
        const key = await core.sessions.start(user.id);
        return json({ user: meJson(user) }, 200, {
          "Set-Cookie": sessionCookie(req, key, SESSION_MAX_AGE_MS / 1000),
        });
      },
    },
    audit: { POST: "auth.login" },
    docs: {
      POST: {
        summary: "Sign in: sets the session cookie tunnel_admin_session",
        body: LoginBody,
        responses: {
          200: { description: "Signed in; the cookie is set", schema: LoginJson },
          401: { description: "Wrong username or password, or the account is disabled" },
          403: { description: "The user is not an administrator" },
          429: { description: "Too many failed logins from this address or for this username (Retry-After)" },
        },
      },
    },
  },
  {
    path: "/api/auth/logout",
    methods: {
      async POST(req, { core }) {
        const key = readSessionCookie(req);
        if (key) await core.sessions.end(key);
        return json({ status: "logged_out" }, 200, { "Set-Cookie": sessionCookie(req, "", 0) });
      },
    },
    audit: { POST: "auth.logout" },
    docs: {
      POST: {
        summary: "Sign out: ends the session and clears the cookie",
        responses: { 200: { description: "Signed out", schema: StatusBody("logged_out") } },
      },
    },
  },
  {
    path: "/api/auth/me",
    methods: {
      GET: (_req, { admin }) => json(meJson(admin)),
    },
    docs: { GET: { summary: "The admin making the request", responses: { 200: { description: "The admin", schema: MeJson } } } },
  },
];
