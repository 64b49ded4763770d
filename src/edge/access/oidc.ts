/**
 * Sign-in with an OpenID provider in front of a tunnel: the authorization
 * code flow (oidc-flow.ts, shared with the portal's company sign-in), then
 * the email checked against the tunnel's allow list and a signed, HttpOnly
 * session cookie per tunnel.
 *
 * Keys are derived per tunnel from a secret of this server process (or of
 * the cluster: oidc-flow.ts shareSessions), the tunnel's name and its OIDC
 * settings: a cookie of one tunnel is nothing to another, an agent that
 * reconnects keeps its visitors signed in, and a server restart signs
 * everyone out unless the nodes share a --cluster-secret.
 */
import { jwtVerify, SignJWT } from "jose";
import type { OidcProvider } from "./oidc-discovery.ts";
import { cookieValue, deriveKeys, OidcFlow, oidcCookie } from "./oidc-flow.ts";

export { cookieValue, shareSessions } from "./oidc-flow.ts";

export const CALLBACK_PATH = "/_burrow/oidc/callback";
export const SESSION_COOKIE = "burrow_session";
const FLOW_COOKIE = "burrow_oidc_flow";
export const SESSION_MAX_AGE_S = 12 * 3600;

export interface OidcSettings {
  clientId: string;
  clientSecret: string;
  allowEmails?: string[];
}

/** What a gate may have apart from today's flags' (the openid-connect action's config). */
export interface GateOptions {
  /** Its cookies' names (several sign-ins on one host each keep their own); default burrow_session and burrow_oidc_flow. */
  sessionCookie?: string;
  flowCookie?: string;
  /** How long a session lasts; default SESSION_MAX_AGE_S. */
  sessionMaxAgeS?: number;
  /** Scopes asked for; default "openid email". */
  scope?: string;
  /** More parameters for the provider's authorization URL. */
  authorizeParams?: Readonly<Record<string, string>>;
}

export type Callback = { kind: "signed-in"; email: string; to: string; cookie: string } | { kind: "refused"; status: 400 | 403; why: string };

export class OidcGate {
  private readonly sessionKey: Uint8Array;
  private readonly flow: OidcFlow;
  private readonly addresses = new Set<string>();
  private readonly domains = new Set<string>();
  /** The session cookie's and the flow cookie's names. */
  readonly sessionCookie: string;
  readonly flowCookie: string;
  private readonly maxAgeS: number;

  constructor(provider: OidcProvider, settings: OidcSettings, tunnelName: string, options: GateOptions = {}) {
    const keys = deriveKeys(tunnelName, provider.issuer, settings);
    this.sessionKey = keys.session;
    this.sessionCookie = options.sessionCookie ?? SESSION_COOKIE;
    this.flowCookie = options.flowCookie ?? FLOW_COOKIE;
    this.maxAgeS = options.sessionMaxAgeS ?? SESSION_MAX_AGE_S;
    this.flow = new OidcFlow(provider, settings, keys.flow, { callbackPath: CALLBACK_PATH, flowCookie: this.flowCookie, scope: options.scope, authorizeParams: options.authorizeParams });
    for (const rule of settings.allowEmails ?? []) (rule.startsWith("@") ? this.domains : this.addresses).add(rule.toLowerCase());
  }

  /** Whether the allow list lets this address in (no list: anyone the provider vouches for). */
  allowsEmail(email: string): boolean {
    if (this.addresses.size === 0 && this.domains.size === 0) return true;
    const lower = email.toLowerCase();
    return this.addresses.has(lower) || this.domains.has(lower.slice(lower.lastIndexOf("@")));
  }

  /** The email of a valid session cookie on this request, or undefined (none, expired, tampered, or no longer allowed). */
  async session(req: Request, host: string): Promise<string | undefined> {
    const token = cookieValue(req.headers.get("cookie"), this.sessionCookie);
    if (!token) return undefined;
    try {
      const { payload } = await jwtVerify(token, this.sessionKey, { algorithms: ["HS256"], audience: host });
      return typeof payload.email === "string" && this.allowsEmail(payload.email) ? payload.email : undefined;
    } catch {
      return undefined;
    }
  }

  /** The redirect to the provider that starts a sign-in, coming back to `to` (a path on this host). */
  async signIn(host: string, secure: boolean, to: string): Promise<Response> {
    const { location, cookie } = await this.flow.start(host, secure, { to });
    return new Response(null, { status: 302, headers: { Location: location, "Set-Cookie": cookie, "Cache-Control": "no-store" } });
  }

  /** The provider sent the visitor back: the flow's checks (oidc-flow.ts), then the email. */
  async callback(req: Request, url: URL, host: string, secure: boolean): Promise<Callback> {
    const end = await this.flow.finish(req, url, host, secure);
    if (end.kind === "refused") return end;
    const { email, emailVerified } = end.claims;
    if (email === undefined) return { kind: "refused", status: 403, why: "The provider gave no email address for this account." };
    if (emailVerified === false) return { kind: "refused", status: 403, why: `The provider has not verified ${email}.` };
    if (!this.allowsEmail(email)) return { kind: "refused", status: 403, why: `${email} may not reach this tunnel.` };
    const session = await new SignJWT({ email })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuedAt()
      .setExpirationTime(`${this.maxAgeS}s`)
      .setAudience(host)
      .sign(this.sessionKey);
    return { kind: "signed-in", email, to: end.carried.to ?? "/", cookie: oidcCookie(this.sessionCookie, session, { path: "/", maxAge: this.maxAgeS, secure }) };
  }

  /** This gate's sign-in is under way on the request (its flow cookie came with it). */
  inFlow(req: Request): boolean {
    return cookieValue(req.headers.get("cookie"), this.flowCookie) !== undefined;
  }

  /** Set-Cookie that ends this gate's sign-in flow's cookie. */
  endFlowCookie(secure: boolean): string {
    return oidcCookie(this.flowCookie, "", { path: CALLBACK_PATH, maxAge: 0, secure });
  }

  /** Set-Cookie that ends this gate's session (signing out). */
  endSessionCookie(secure: boolean): string {
    return oidcCookie(this.sessionCookie, "", { path: "/", maxAge: 0, secure });
  }
}
