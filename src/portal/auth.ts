/** POST /_burrow/api/login and /_burrow/api/logout: the portal's session. */
import * as v from "valibot";
import { json, parseBody } from "../api/http.ts";
import { ErrorBody, StatusBody } from "../api/responses.ts";
import { checkPassword } from "../core/login.ts";
import type { PortalRoute } from "./context.ts";
import { readSessionCookie, sessionCookie } from "./cookie.ts";
import { LoginBody } from "./schemas.ts";

export const SignedInJson = v.strictObject({ user: v.strictObject({ id: v.number(), username: v.string() }) });

export const authRoutes: PortalRoute[] = [
  {
    path: "/_burrow/api/login",
    public: true,
    methods: {
      async POST(req, { core, address, audit, secure }) {
        const body = await parseBody(req, LoginBody);
        audit.actor = { username: body.username }; // who tried, for a failure's entry
        // the admin API's throttle: a password guessed here counts there, and the other way round
        const user = await checkPassword(core.users, core.loginThrottle, address, body.username, body.password);
        audit.actor = { userId: user.id, username: user.username };
        const key = await core.sessions.start(user.id, "portal");
        return json({ user: { id: user.id, username: user.username } }, 200, { "Set-Cookie": sessionCookie(secure, key) });
      },
    },
    audit: { POST: "portal.login" },
    docs: {
      POST: {
        summary: "Sign in with a username and password: sets the session cookie (`__Host-burrow_portal` over HTTPS, `burrow_portal` over plain HTTP)",
        body: LoginBody,
        responses: {
          200: { description: "Signed in; the cookie is set", schema: SignedInJson },
          401: { description: "Wrong username or password, or the account is disabled", schema: ErrorBody },
          429: { description: "Too many failed logins from this address or for this username (Retry-After); shared with the admin API's", schema: ErrorBody },
        },
      },
    },
  },
  {
    path: "/_burrow/api/logout",
    public: true,
    methods: {
      async POST(req, { core, audit, secure }) {
        const { key } = readSessionCookie(req, secure);
        if (key) {
          const user = await core.sessions.resolvePortal(key).catch(() => undefined);
          if (user) audit.actor = { userId: user.id, username: user.username };
          await core.sessions.end(key);
        }
        return json({ status: "logged_out" }, 200, { "Set-Cookie": sessionCookie(secure, "") });
      },
    },
    audit: { POST: "portal.logout" },
    docs: {
      POST: {
        summary: "Sign out: ends the session and clears its cookie (answers the same when there was none)",
        responses: { 200: { description: "Signed out", schema: StatusBody("logged_out") } },
      },
    },
  },
];
