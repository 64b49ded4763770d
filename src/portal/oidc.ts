/**
 * Company sign-in for the portal: people sign in with the company's OpenID
 * provider (the flow is the tunnels' own, edge/access/oidc-flow.ts) and get
 * a portal session. Who may: a verified email in --portal-oidc-allow-domains
 * and a group of --portal-oidc-allow-groups in the `groups` claim, each when
 * given. A person's first sign-in makes their user (username from the email,
 * no password, the --portal-default-* limits), unless
 * --portal-oidc-invite-only, when only an invitation opened with company
 * sign-in makes one. Later sign-ins find the user by the provider's subject,
 * never by email (an email can change hands).
 */
import * as v from "valibot";
import { json, parseBody } from "../api/http.ts";
import { ErrorBody } from "../api/responses.ts";
import { AppError } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import type { UserRow } from "../db/schema.ts";
import { discover } from "../edge/access/oidc-discovery.ts";
import { deriveKeys, OidcFlow, type OidcClaims } from "../edge/access/oidc-flow.ts";
import { escapeHtml } from "../http/html.ts";
import { page } from "../edge/pages.ts";
import type { PortalContext, PortalRoute } from "./context.ts";
import { sessionCookie } from "./cookie.ts";

export const PORTAL_CALLBACK_PATH = "/_burrow/oidc/callback";
const FLOW_COOKIE = "burrow_portal_oidc_flow";

export interface PortalOidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  allowDomains: string[];
  allowGroups: string[];
  inviteOnly: boolean;
  defaults: { maxTunnels: number; maxDevices: number; trafficLimit: number; trafficPeriod: "daily" | "monthly" | "quarterly"; allowedProtocols: string };
}

const redirectTarget = v.pipe(
  v.string("must be a string"),
  v.maxLength(200, "must be at most 200 characters"),
  v.check((s) => s.startsWith("/") && !s.startsWith("//") && !s.includes("\\"), "must be a path on this site, such as /devices"),
);

export const StartBody = v.object({
  to: v.optional(redirectTarget),
  invitation: v.optional(v.pipe(v.string("must be a string"), v.maxLength(200, "must be at most 200 characters"))),
});

export const SignInOptionsJson = v.strictObject({ password: v.literal(true), company: v.boolean(), invite_only: v.boolean() });
export const StartJson = v.strictObject({ url: v.string() });

/** A page for a sign-in that cannot end well, with the way back (the edge's own page, self-contained). */
function refusedPage(status: number, why: string): Response {
  return page(status, "Cannot sign in", `<div class="status">${status}</div><h1>Cannot sign in</h1><p>${escapeHtml(why)}</p><p><a href="/">Back to the sign-in page</a></p>`);
}

/** "Alice.Smith+x@Example.com" -> "alice.smith-x"; what is left of a name a username may hold. */
function usernameBase(claims: OidcClaims): string {
  const local = claims.email ? claims.email.slice(0, claims.email.lastIndexOf("@")) : `user-${claims.sub}`;
  const base = local.toLowerCase().replace(/[^a-z0-9_.-]+/g, "-").replace(/^[-.]+|[-.]+$/g, "").slice(0, 56);
  return base === "" ? "user" : base;
}

export function portalOidcRoutes(settings: PortalOidcSettings | undefined, domainHost: () => string): PortalRoute[] {
  const options: PortalRoute = {
    path: "/_burrow/api/sign-in-options",
    public: true,
    methods: {
      GET: async () => json({ password: true, company: settings !== undefined, invite_only: settings?.inviteOnly ?? false }),
    },
    docs: { GET: { summary: "How people sign in here: with a password, and with the company's provider when the server has one", security: [], responses: { 200: { description: "The ways", schema: SignInOptionsJson } } } },
  };
  if (!settings) return [options];

  let flow: Promise<OidcFlow> | undefined;
  /** The provider's flow, discovered on first use (and again after a failure). */
  const theFlow = (): Promise<OidcFlow> => {
    flow ??= discover(settings.issuer)
      .then((provider) => new OidcFlow(provider, settings, deriveKeys("portal", provider.issuer, settings).flow, { callbackPath: PORTAL_CALLBACK_PATH, flowCookie: FLOW_COOKIE, scope: settings.allowGroups.length > 0 ? "openid email groups" : "openid email", wantGroups: settings.allowGroups.length > 0 }))
      .catch((err) => {
        flow = undefined;
        throw err;
      });
    return flow;
  };

  /** Why this person may not sign in here, or undefined. */
  function refusal(claims: OidcClaims): string | undefined {
    const who = claims.email ?? "this account";
    if (settings!.allowDomains.length > 0) {
      if (!claims.email) return "The provider gave no email address for this account.";
      if (claims.emailVerified === false) return `The provider has not verified ${claims.email}.`;
      const domain = claims.email.slice(claims.email.lastIndexOf("@") + 1).toLowerCase();
      if (!settings!.allowDomains.includes(domain)) return `${who} may not sign in here: only addresses at ${settings!.allowDomains.join(", ")}.`;
    }
    if (settings!.allowGroups.length > 0 && !(claims.groups ?? []).some((g) => settings!.allowGroups.includes(g))) {
      return `${who} may not sign in here: only members of ${settings!.allowGroups.join(", ")}.`;
    }
    return undefined;
  }

  /** The user a sign-in is: found by subject, made by an invitation, or made with the defaults (unless invite-only). */
  async function userFor(core: Core, claims: OidcClaims, carried: Record<string, string>, address: string): Promise<{ user: UserRow; made: boolean } | { refused: string }> {
    const subject = `${settings!.issuer} ${claims.sub}`;
    const known = await core.users.byOidcSubject(subject);
    if (known) return known.enabled ? { user: known, made: false } : { refused: "The account is disabled." };
    if (!carried.invitation && settings!.inviteOnly) return { refused: `${claims.email ?? "This account"} has no account here yet: ask an admin for an invitation.` };
    const base = usernameBase(claims);
    for (let n = 1; n <= 50; n++) {
      const username = n === 1 ? base : `${base}-${n}`;
      if (await core.users.byName(username)) continue;
      try {
        if (carried.invitation) {
          const { user } = await core.invitations.accept(carried.invitation, address, { username, oidcSubject: subject });
          return { user, made: true };
        }
        const user = await core.users.create({ username, oidcSubject: subject, role: "user", ...settings!.defaults });
        return { user, made: true };
      } catch (err) {
        if (err instanceof AppError && err.code === "USERNAME_TAKEN") continue; // taken meanwhile: the next
        if (err instanceof AppError && err.code === "INVITATION_INVALID") return { refused: err.message };
        throw err;
      }
    }
    return { refused: "No free username could be made from this account's email." };
  }

  return [
    options,
    {
      path: "/_burrow/api/oidc/start",
      public: true,
      methods: {
        async POST(req, { secure }) {
          const body = await parseBody(req, StartBody);
          const f = await theFlow();
          const carried: Record<string, string> = { to: body.to ?? (body.invitation ? "/devices" : "/") };
          if (body.invitation) carried.invitation = body.invitation;
          const { location, cookie } = await f.start(domainHost(), secure, carried);
          return json({ url: location }, 200, { "Set-Cookie": cookie });
        },
      },
      docs: {
        POST: {
          summary: "Start a company sign-in: the provider's address to go to (the flow's cookie is set); with `invitation`, the sign-in uses that invitation",
          body: StartBody,
          security: [],
          responses: {
            200: { description: "Where to send the browser", schema: StartJson },
            502: { description: "OIDC_DISCOVERY_FAILED: the provider did not answer", schema: ErrorBody },
          },
        },
      },
    },
    {
      path: PORTAL_CALLBACK_PATH,
      public: true,
      methods: {
        async GET(req, ctx: PortalContext) {
          const { core, secure, address, audit } = ctx;
          const f = await theFlow();
          const end = await f.finish(req, new URL(req.url), domainHost(), secure);
          const done = (res: Response) => {
            res.headers.append("Set-Cookie", f.endFlow(secure));
            return res;
          };
          if (end.kind === "refused") return done(refusedPage(end.status, end.why));
          audit.actor = { username: end.claims.email ?? end.claims.sub };
          audit.details = { method: "company sign-in" };
          const why = refusal(end.claims);
          if (why) {
            audit.refused = "FORBIDDEN";
            return done(refusedPage(403, why));
          }
          const found = await userFor(core, end.claims, end.carried, address);
          if ("refused" in found) {
            audit.refused = "FORBIDDEN";
            return done(refusedPage(403, found.refused));
          }
          const { user, made } = found;
          audit.actor = { userId: user.id, username: user.username };
          audit.details = { method: "company sign-in", ...(made ? { user_made: true } : {}), ...(made && end.carried.invitation ? { invitation: true } : {}) };
          const key = await core.sessions.start(user.id, "portal");
          const to = end.carried.to && end.carried.to.startsWith("/") && !end.carried.to.startsWith("//") ? end.carried.to : "/";
          const res = new Response(null, { status: 302, headers: { Location: made ? "/devices" : to, "Cache-Control": "no-store" } });
          res.headers.append("Set-Cookie", sessionCookie(secure, key));
          return done(res);
        },
      },
      audit: { GET: "portal.login" },
      docs: {
        GET: {
          summary: "Where the provider sends the browser back: the session is set and the browser sent on (a page says why when it cannot be)",
          security: [],
          responses: { 302: { description: "Signed in" }, 400: { description: "The sign-in expired or failed (a page)" }, 403: { description: "This person may not sign in here (a page)" } },
        },
      },
    },
  ];
}
