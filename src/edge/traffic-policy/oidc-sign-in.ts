/**
 * The edge's OpenID Connect sign-in (edge/access/oidc.ts's gate, the one
 * --oidc-issuer uses) as a policy's openid-connect action asks for it
 * (policy/services.ts OidcAdapter; the tunnel's --oidc flags lend the
 * action their own, access/oidc-flag.ts): the provider found by discovery (kept
 * a few minutes), the code flow with PKCE, state and nonce, the callback at
 * /_burrow/oidc/callback, and a signed session cookie, whose keys derive
 * from the server's secret (the cluster's, with several nodes), the host
 * and the action's provider and client, so a session is worth nothing to
 * another tunnel or another sign-in.
 *
 * Several sign-ins may cover one host (an operator's and the tunnel's
 * own): each keeps its own cookies (named by its `auth_id`), and a
 * callback is finished by the sign-in whose flow cookie came with it;
 * another one lets it pass when its own session holds.
 *
 * Two paths of ngrok's, under the edge's own prefix:
 * /_burrow/oidc/login starts a sign-in (and comes back to /), and
 * /_burrow/oidc/logout ends the session; with several sign-ins,
 * `?auth_id=` says whose (none: the one without an auth_id).
 */
import type { OidcAdapter, OidcRequest, OidcSettings } from "../../policy/index.ts";
import { discover, type OidcProvider } from "../access/oidc-discovery.ts";
import { askSignIn, finishSignIn, gateRequest, responded, sessionOnly, type OidcVerdict } from "../access/oidc-answers.ts";
import { CALLBACK_PATH, OidcGate } from "../access/oidc.ts";
import { signInRefusedPage } from "../access/pages.ts";
import { badRequestPage, page } from "../pages.ts";

export const LOGIN_PATH = "/_burrow/oidc/login";
export const LOGOUT_PATH = "/_burrow/oidc/logout";
/** Gates kept for one action's settings (one per host it covers); past it the oldest goes (its sessions stay good: keys derive again). */
const HOSTS_KEPT = 256;

export class PolicySignIn implements OidcAdapter {
  /** Per action (its settings object, made once when its policy is compiled): a gate per host. */
  private readonly gates = new WeakMap<OidcSettings, Map<string, { provider: OidcProvider; gate: OidcGate }>>();

  constructor(
    /** Plain-http issuers on loopback are taken (--oidc-http-issuers loopback). */
    private readonly httpIssuers: boolean,
  ) {}

  async admit(request: OidcRequest, settings: OidcSettings): Promise<OidcVerdict> {
    if (!this.httpIssuers && settings.issuer.toLowerCase().startsWith("http:")) {
      return responded(page(503, "Sign-in unavailable", `<div class="status">503</div><h1>Sign-in unavailable</h1><p>This sign-in's provider is plain http, which this server does not allow.</p>`));
    }
    let provider: OidcProvider;
    try {
      provider = await discover(settings.issuer);
    } catch {
      return responded(page(503, "Sign-in unavailable", `<div class="status">503</div><h1>Sign-in unavailable</h1><p>The sign-in's provider did not answer. Try again in a moment.</p>`, { "Retry-After": "5" }));
    }
    const { host, secure } = request;
    const gate = this.gate(provider, settings, host);
    const asked = gateRequest(request);
    if (!asked) return responded(badRequestPage("This request cannot be checked against the tunnel's access rules."));
    const { req, url } = asked;
    // a visit judged again (live-rejudge.ts): its session holds, or it is not let stay; no sign-in is begun or finished
    if (request.rejudging) return sessionOnly(gate, req, host);
    const ours = (url.searchParams.get("auth_id") ?? undefined) === settings.authId;

    if (url.pathname === CALLBACK_PATH && gate.inFlow(req)) return responded(await finishSignIn(gate, req, url, host, secure));
    if (url.pathname === LOGOUT_PATH && ours) {
      return responded(new Response(null, { status: 302, headers: { Location: "/", "Set-Cookie": gate.endSessionCookie(secure), "Cache-Control": "no-store" } }));
    }
    if (url.pathname === LOGIN_PATH && ours) return responded(await gate.signIn(host, secure, "/"));
    const email = await gate.session(req, host);
    if (email !== undefined) return { kind: "signed-in", email, stripCookies: [gate.sessionCookie] };
    // another sign-in's callback reaches this one only with this one's session; without it, it is no sign-in of anyone's
    if (url.pathname === CALLBACK_PATH) return responded(signInRefusedPage(400, "This sign-in has expired or was started in another browser. Open the page again to sign in."));
    return responded(await askSignIn(gate, req, url, host, secure));
  }

  /** The gate of these settings on `host`, made again when the provider's metadata was read again. */
  private gate(provider: OidcProvider, settings: OidcSettings, host: string): OidcGate {
    let hosts = this.gates.get(settings);
    if (!hosts) this.gates.set(settings, (hosts = new Map()));
    const known = hosts.get(host);
    if (known && known.provider === provider) return known.gate;
    const suffix = settings.authId !== undefined ? `_${settings.authId}` : "";
    const gate = new OidcGate(provider, { clientId: settings.clientId, clientSecret: settings.clientSecret, allowEmails: settings.allowEmails }, `policy:${host}${suffix}`, {
      sessionCookie: `burrow_session${suffix}`,
      flowCookie: `burrow_oidc_flow${suffix}`,
      sessionMaxAgeS: settings.maxSessionS,
      scope: settings.scopes.join(" "),
      authorizeParams: settings.authorizeParams,
    });
    hosts.delete(host);
    if (hosts.size >= HOSTS_KEPT) hosts.delete(hosts.keys().next().value!);
    hosts.set(host, { provider, gate });
    return gate;
  }
}
