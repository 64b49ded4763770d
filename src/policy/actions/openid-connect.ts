/**
 * openid-connect: visitors sign in with an OpenID provider before they
 * reach the tunnel, today's --oidc-issuer as an action (ngrok's name and
 * fields; burrow's `allow_emails` beside them). The sign-in itself (the
 * code flow, the session cookie, the callback path) is the edge's, in
 * edge/access/oidc.ts: the engine asks it through the adapter the edge
 * plugs into services.oidc (an edge without one, such as `burrow policy
 * test`, answers 503). Signed in, the visitor's email is the identity and
 * is passed to the service in X-Burrow-User-Email, as today; the edge's
 * own cookies are taken off the forwarded request.
 *
 * ngrok's fields: `issuer_url`, `client_id`, `client_secret`, `scopes`
 * (asked for besides openid and email, which the sign-in needs),
 * `auth_id` (names this sign-in's cookies, and the one the login and
 * logout paths mean), `authz_url_params`, `max_session_duration`, and
 * `allow_cors_preflight` (a CORS preflight passes unsigned). Taken and not
 * used: `idle_session_duration` and `userinfo_refresh_interval` (a session
 * lasts its whole duration; the email is read once, at sign-in).
 */
import * as v from "valibot";
import { emailRuleProblem, issuerProblem, USER_EMAIL_HEADER } from "../../validate/access.ts";
import { parseDuration } from "./common.ts";
import type { WorkingRequest } from "../message.ts";
import { defineAction, textResponse } from "./types.ts";

/** The scopes the sign-in needs whatever the config says: the ID token, and the email that is the identity. */
const NEEDED_SCOPES = ["openid", "email"];
/** A session's length when the config names none (today's --oidc-issuer sessions), and its bounds. */
const DEFAULT_SESSION_S = 12 * 3600;
const MIN_SESSION_S = 60;
const MAX_SESSION_S = 30 * 24 * 3600;
/** Parameters the flow sets itself: a config cannot replace them. */
const FLOW_PARAMS = new Set(["client_id", "redirect_uri", "response_type", "scope", "state", "nonce", "code_challenge", "code_challenge_method"]);

export const openidConnect = defineAction({
  type: "openid-connect",
  phases: ["on_http_request"],
  schema: v.strictObject({
    issuer_url: v.string(),
    client_id: v.pipe(v.string(), v.minLength(1)),
    client_secret: v.pipe(v.string(), v.minLength(1)),
    scopes: v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(/^[\x21\x23-\x5b\x5d-\x7e]+$/, "not a scope"))), v.maxLength(32)), ["profile"]),
    allow_emails: v.optional(v.array(v.string()), []),
    auth_id: v.optional(v.pipe(v.string(), v.regex(/^[A-Za-z0-9_-]{1,64}$/, "1 to 64 letters, digits, '-' or '_'"))),
    authz_url_params: v.optional(v.pipe(v.record(v.pipe(v.string(), v.maxLength(256)), v.pipe(v.string(), v.maxLength(1024))), v.maxEntries(16)), {}),
    max_session_duration: v.optional(v.string()),
    allow_cors_preflight: v.optional(v.boolean(), false),
    // ngrok's, taken and not used by burrow's sign-in
    idle_session_duration: v.optional(v.string()),
    userinfo_refresh_interval: v.optional(v.string()),
    auth_cookie_domain: v.optional(v.string()),
  }),
  compile(config, tools) {
    const issuer = issuerProblem(config.issuer_url);
    if (issuer) tools.error(["issuer_url"], issuer);
    config.allow_emails.forEach((rule, i) => {
      const problem = emailRuleProblem(rule);
      if (problem) tools.error(["allow_emails", i], problem);
    });
    for (const name of Object.keys(config.authz_url_params)) {
      if (FLOW_PARAMS.has(name)) tools.error(["authz_url_params", name], `'${name}' is the sign-in's own parameter`);
    }
    let maxSessionS = DEFAULT_SESSION_S;
    if (config.max_session_duration !== undefined) {
      const ms = parseDuration(config.max_session_duration);
      if (ms === undefined || ms < MIN_SESSION_S * 1000 || ms > MAX_SESSION_S * 1000) tools.error(["max_session_duration"], `'${config.max_session_duration}' is not a duration from 1m to 720h`);
      else maxSessionS = Math.floor(ms / 1000);
    }
    const scopes = [...new Set([...NEEDED_SCOPES, ...config.scopes])];
    const settings = {
      issuer: config.issuer_url,
      clientId: config.client_id,
      clientSecret: config.client_secret,
      scopes,
      allowEmails: config.allow_emails,
      ...(config.auth_id !== undefined ? { authId: config.auth_id } : {}),
      ...(Object.keys(config.authz_url_params).length > 0 ? { authorizeParams: config.authz_url_params } : {}),
      maxSessionS,
    };
    return {
      type: "openid-connect",
      async run(ctx) {
        const req = ctx.bindings.req();
        // a CORS preflight carries no cookies: let it through unsigned when the config says so
        if (config.allow_cors_preflight && req.method === "OPTIONS" && req.header("origin") !== undefined && req.header("access-control-request-method") !== undefined) {
          return { kind: "continue", note: "a CORS preflight, let through" };
        }
        const oidc = ctx.services.oidc;
        if (!oidc) {
          ctx.problem("openid-connect: this edge has no OIDC sign-in plugged in");
          return { kind: "respond", response: textResponse(503, "Sign-in is not available here.\n"), note: "no OIDC sign-in on this edge" };
        }
        const rejudging = ctx.bindings.input.rejudging === true;
        const verdict = await oidc.admit({ method: req.method, target: req.target, host: req.host, secure: req.scheme === "https", headers: req.fields, ...(rejudging ? { rejudging } : {}) }, settings);
        if (verdict.kind === "respond") return { kind: "respond", response: verdict.response, note: "sent to sign in" };
        // the identity header is the edge's to say: whatever was said under it before goes (a visitor's never came this far)
        if (req.header(USER_EMAIL_HEADER) !== undefined) req.headers = req.headers.filter(([n]) => n.toLowerCase() !== USER_EMAIL_HEADER);
        stripCookies(req, verdict.stripCookies);
        // the edge's own field, which forward passes as the edge's word (a visitor's X-Burrow-* never passes)
        req.appendEdgeField(USER_EMAIL_HEADER, verdict.email);
        ctx.bindings.identity = verdict.email;
        ctx.bindings.changed();
        ctx.setVariables("oidc", { identity: { email: verdict.email } });
        return { kind: "continue", note: `signed in as ${verdict.email}` };
      },
    };
  },
});

/** The named cookies taken out of every Cookie header (a header left empty goes); the request's fields are copied only when one has them. */
function stripCookies(req: WorkingRequest, names: readonly string[]): void {
  if (names.length === 0 || !req.fields.some(([n, v]) => n.toLowerCase() === "cookie" && names.some((c) => v.includes(c)))) return;
  const headers = req.headers;
  for (let i = headers.length - 1; i >= 0; i--) {
    const [name, value] = headers[i]!;
    if (name.toLowerCase() !== "cookie" || !names.some((c) => value.includes(c))) continue;
    const kept = value.split(";").filter((c) => !names.includes(c.trim().split("=")[0]!)).join(";").trim();
    if (kept === "") headers.splice(i, 1);
    else headers[i] = [name, kept];
  }
}
