/**
 * openid-connect: visitors sign in with an OpenID provider before they
 * reach the tunnel, today's --oidc-issuer as an action (ngrok's name and
 * fields; burrow's `allow_emails` beside them). The sign-in itself (the
 * code flow, the session cookie, the callback path) is the edge's, in
 * edge/access/oidc.ts: the engine asks it through the adapter the edge
 * plugs into services.oidc, and until one is plugged in the action answers
 * 503. Signed in, the visitor's email is the identity and is passed to the
 * service in X-Burrow-User-Email, as today; the edge's own cookies are
 * taken off the forwarded request.
 */
import * as v from "valibot";
import { emailRuleProblem, issuerProblem, USER_EMAIL_HEADER } from "../../validate/access.ts";
import { defineAction, textResponse } from "./types.ts";

export const openidConnect = defineAction({
  type: "openid-connect",
  phases: ["on_http_request"],
  schema: v.strictObject({
    issuer_url: v.string(),
    client_id: v.pipe(v.string(), v.minLength(1)),
    client_secret: v.pipe(v.string(), v.minLength(1)),
    scopes: v.optional(v.array(v.string()), ["openid", "profile", "email"]),
    allow_emails: v.optional(v.array(v.string()), []),
    // ngrok's, taken and not used by burrow's sign-in (its sessions last 12 h)
    auth_id: v.optional(v.string()),
    max_session_duration: v.optional(v.string()),
    idle_session_duration: v.optional(v.string()),
    allow_cors_preflight: v.optional(v.boolean()),
    auth_cookie_domain: v.optional(v.string()),
  }),
  compile(config, tools) {
    const issuer = issuerProblem(config.issuer_url);
    if (issuer) tools.error(["issuer_url"], issuer);
    config.allow_emails.forEach((rule, i) => {
      const problem = emailRuleProblem(rule);
      if (problem) tools.error(["allow_emails", i], problem);
    });
    const settings = { issuer: config.issuer_url, clientId: config.client_id, clientSecret: config.client_secret, scopes: config.scopes, allowEmails: config.allow_emails };
    return {
      type: "openid-connect",
      async run(ctx) {
        const oidc = ctx.services.oidc;
        if (!oidc) {
          ctx.problem("openid-connect: this edge has no OIDC sign-in plugged in");
          return { kind: "respond", response: textResponse(503, "Sign-in is not available here.\n"), note: "no OIDC sign-in on this edge" };
        }
        const req = ctx.bindings.req();
        const verdict = await oidc.admit({ method: req.method, target: req.target, host: req.host, secure: req.scheme === "https", headers: req.headers }, settings);
        if (verdict.kind === "respond") return { kind: "respond", response: verdict.response, note: "sent to sign in" };
        // the identity header is the edge's to say: whatever the visitor sent under it goes
        req.headers = req.headers.filter(([n]) => n.toLowerCase() !== USER_EMAIL_HEADER);
        stripCookies(req.headers, verdict.stripCookies);
        req.headers.push([USER_EMAIL_HEADER, verdict.email]);
        ctx.bindings.identity = verdict.email;
        ctx.bindings.changed();
        ctx.setVariables("oidc", { identity: { email: verdict.email } });
        return { kind: "continue", note: `signed in as ${verdict.email}` };
      },
    };
  },
});

/** The named cookies taken out of every Cookie header (a header left empty goes). */
function stripCookies(headers: [string, string][], names: readonly string[]): void {
  if (names.length === 0) return;
  for (let i = headers.length - 1; i >= 0; i--) {
    const [name, value] = headers[i]!;
    if (name.toLowerCase() !== "cookie") continue;
    const kept = value.split(";").filter((c) => !names.includes(c.trim().split("=")[0]!)).join(";").trim();
    if (kept === "") headers.splice(i, 1);
    else headers[i] = [name, kept];
  }
}
