/**
 * The edge's OpenID Connect sign-in (edge/access/oidc.ts, today's
 * --oidc-issuer) as the openid-connect action asks for it
 * (policy/services.ts OidcAdapter): the provider found by discovery (kept
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
import type { OidcAdapter, OidcRequest, OidcSettings, PolicyResponse } from "../../policy/index.ts";
import { discover, type OidcProvider } from "../access/oidc-discovery.ts";
import { CALLBACK_PATH, OidcGate } from "../access/oidc.ts";
import { signInRefusedPage, signInRequiredPage } from "../access/pages.ts";
import { page } from "../pages.ts";

export const LOGIN_PATH = "/_burrow/oidc/login";
export const LOGOUT_PATH = "/_burrow/oidc/logout";
/** Gates kept for one action's settings (one per host it covers); past it the oldest goes (its sessions stay good: keys derive again). */
const HOSTS_KEPT = 256;

type Verdict = Awaited<ReturnType<OidcAdapter["admit"]>>;

export class PolicySignIn implements OidcAdapter {
  /** Per action (its settings object, made once when its policy is compiled): a gate per host. */
  private readonly gates = new WeakMap<OidcSettings, Map<string, { provider: OidcProvider; gate: OidcGate }>>();

  constructor(
    /** Plain-http issuers on loopback are taken (--oidc-http-issuers loopback). */
    private readonly httpIssuers: boolean,
  ) {}

  async admit(request: OidcRequest, settings: OidcSettings): Promise<Verdict> {
    if (!this.httpIssuers && settings.issuer.toLowerCase().startsWith("http:")) {
      return respond(page(503, "Sign-in unavailable", `<div class="status">503</div><h1>Sign-in unavailable</h1><p>This sign-in's provider is plain http, which this server does not allow.</p>`));
    }
    let provider: OidcProvider;
    try {
      provider = await discover(settings.issuer);
    } catch {
      return respond(page(503, "Sign-in unavailable", `<div class="status">503</div><h1>Sign-in unavailable</h1><p>The sign-in's provider did not answer. Try again in a moment.</p>`, { "Retry-After": "5" }));
    }
    const gate = this.gate(provider, settings, request.host);
    const url = new URL(`${request.secure ? "https" : "http"}://${request.host}${request.target}`);
    const headers = new Headers();
    for (const [name, value] of request.headers) headers.append(name, value);
    const req = new Request(url.href, { method: request.method, headers });
    const ours = (url.searchParams.get("auth_id") ?? undefined) === settings.authId;

    if (url.pathname === CALLBACK_PATH && gate.inFlow(req)) return respond(await this.callback(gate, req, url, request));
    if (url.pathname === LOGOUT_PATH && ours) {
      return respond(new Response(null, { status: 302, headers: { Location: "/", "Set-Cookie": gate.endSessionCookie(request.secure), "Cache-Control": "no-store" } }));
    }
    if (url.pathname === LOGIN_PATH && ours) return respond(await gate.signIn(request.host, request.secure, "/"));
    const email = await gate.session(req, request.host);
    if (email !== undefined) return { kind: "signed-in", email, stripCookies: [gate.sessionCookie] };
    // another sign-in's callback reaches this one only with this one's session; without it, it is no sign-in of anyone's
    if (url.pathname === CALLBACK_PATH) return respond(signInRefusedPage(400, "This sign-in has expired or was started in another browser. Open the page again to sign in."));
    // a browser opening a page is sent to sign in; scripts, fetches and WebSocket upgrades are told 401
    const upgrade = (req.headers.get("upgrade") ?? "") !== "";
    if (req.method === "GET" && !upgrade && (req.headers.get("accept") ?? "").includes("text/html")) return respond(await gate.signIn(request.host, request.secure, url.pathname + url.search));
    return respond(signInRequiredPage(request.host, `Burrow-OIDC realm="${request.host.replace(/["\\]/g, "")}"`, "This tunnel asks visitors to sign in with their browser."));
  }

  /** The provider sent the visitor back to this gate's flow: its session, or why not. */
  private async callback(gate: OidcGate, req: Request, url: URL, request: OidcRequest): Promise<Response> {
    const done = await gate.callback(req, url, request.host, request.secure);
    if (done.kind === "refused") {
      const res = signInRefusedPage(done.status, done.why);
      res.headers.append("Set-Cookie", gate.endFlowCookie(request.secure));
      return res;
    }
    const headers = new Headers({ Location: localPath(done.to), "Cache-Control": "no-store" });
    headers.append("Set-Cookie", done.cookie);
    headers.append("Set-Cookie", gate.endFlowCookie(request.secure));
    return new Response(null, { status: 302, headers });
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

/** An answer of the edge's as the action gives it (Set-Cookie fields kept apart). */
async function respond(res: Response): Promise<Verdict> {
  const headers: [string, string][] = [];
  res.headers.forEach((value, name) => {
    if (name !== "set-cookie") headers.push([name, value]);
  });
  for (const cookie of res.headers.getSetCookie()) headers.push(["set-cookie", cookie]);
  const response: PolicyResponse = { status: res.status, headers, body: res.body === null ? "" : await res.text() };
  return { kind: "respond", response };
}

/** A path on this host, resolved as a browser resolves a Location (so it cannot lead off the host). */
function localPath(to: string): string {
  if (!to.startsWith("/")) return "/";
  const base = "http://burrow.invalid";
  try {
    const resolved = new URL(to, base);
    return resolved.origin === base ? resolved.pathname + resolved.search : "/";
  } catch {
    return "/";
  }
}
