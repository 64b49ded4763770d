/** POST /api/auth/login, POST /api/auth/logout, GET /api/auth/me; the session cookie. */
import { checkLogin } from "../core/login.ts";
import { SESSION_MAX_AGE_MS } from "../core/sessions.ts";
import type { Route } from "./context.ts";
import { json, parseBody } from "./http.ts";
import { meJson } from "./json.ts";
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

export const authRoutes: Route[] = [
  {
    path: "/api/auth/login",
    public: true,
    methods: {
      async POST(req, { core, address }) {
        const body = await parseBody(req, LoginBody);
        const user = await checkLogin(core.users, core.loginThrottle, address, body.username, body.password);
        const key = core.sessions.start(user.id);
        return json({ user: meJson(user) }, 200, {
          "Set-Cookie": sessionCookie(req, key, SESSION_MAX_AGE_MS / 1000),
        });
      },
    },
  },
  {
    path: "/api/auth/logout",
    methods: {
      POST(req, { core }) {
        const key = readSessionCookie(req);
        if (key) core.sessions.end(key);
        return json({ status: "logged_out" }, 200, { "Set-Cookie": sessionCookie(req, "", 0) });
      },
    },
  },
  {
    path: "/api/auth/me",
    methods: {
      GET: (_req, { admin }) => json(meJson(admin)),
    },
  },
];
