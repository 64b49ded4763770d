/**
 * Sign-in with an OpenID provider in front of a tunnel: the authorization
 * code flow with PKCE, state and nonce (oauth4webapi), the ID token's
 * signature checked against the provider's keys (jose), and a signed,
 * HttpOnly session cookie per tunnel. The flow's own secrets (state, nonce,
 * code verifier, where to go back to) wait in an encrypted cookie scoped to
 * the callback path, so the edge keeps nothing per visitor.
 *
 * Keys are derived per tunnel from a random key of this server process,
 * the tunnel's name and its OIDC settings: a cookie of one tunnel is
 * nothing to another, an agent that reconnects keeps its visitors signed
 * in, and a server restart signs everyone out. Nodes that share a
 * --cluster-secret derive that key from it instead (shareSessions), so a
 * session is good on every node: an agent that moves to another node, or
 * whose node restarts, keeps its visitors signed in.
 */
import { createHash, createHmac } from "node:crypto";
import { EncryptJWT, jwtDecrypt, jwtVerify, SignJWT } from "jose";
import * as oauth from "oauth4webapi";
import type { OidcProvider } from "./oidc-discovery.ts";

export const CALLBACK_PATH = "/_burrow/oidc/callback";
export const SESSION_COOKIE = "burrow_session";
const FLOW_COOKIE = "burrow_oidc_flow";
export const SESSION_MAX_AGE_S = 12 * 3600;
/** A sign-in must come back within this. */
const FLOW_MAX_AGE_S = 10 * 60;

/** The secret every tunnel's keys are derived from: this process's own, or the cluster's. */
let sessionSecret: Uint8Array = crypto.getRandomValues(new Uint8Array(32));

/** Several nodes: sessions and sign-ins that every node holding `clusterSecret` honours. Call before any tunnel. */
export function shareSessions(clusterSecret: string): void {
  // its own label, so that no other use of the cluster secret (the nodes' HMAC) gives the same key
  sessionSecret = createHmac("sha256", clusterSecret).update("burrow oidc session secret").digest();
}

export interface OidcSettings {
  clientId: string;
  clientSecret: string;
  allowEmails?: string[];
}

export type Callback = { kind: "signed-in"; email: string; to: string; cookie: string } | { kind: "refused"; status: 400 | 403; why: string };

/** The value of cookie `name` in a Cookie header, or undefined. */
export function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export class OidcGate {
  private readonly sessionKey: Uint8Array;
  private readonly flowKey: Uint8Array;
  private readonly client: oauth.Client;
  private readonly clientAuth: oauth.ClientAuth;
  private readonly addresses = new Set<string>();
  private readonly domains = new Set<string>();

  constructor(
    private readonly provider: OidcProvider,
    settings: OidcSettings,
    tunnelName: string,
  ) {
    const base = createHmac("sha256", sessionSecret)
      .update([tunnelName, provider.issuer, settings.clientId, createHash("sha256").update(settings.clientSecret).digest("hex")].join("\n"))
      .digest();
    this.sessionKey = createHmac("sha256", base).update("session").digest();
    this.flowKey = createHmac("sha256", base).update("flow").digest();
    this.client = { client_id: settings.clientId };
    const methods = provider.metadata.token_endpoint_auth_methods_supported;
    this.clientAuth = !methods || methods.includes("client_secret_basic") ? oauth.ClientSecretBasic(settings.clientSecret) : oauth.ClientSecretPost(settings.clientSecret);
    for (const rule of settings.allowEmails ?? []) (rule.startsWith("@") ? this.domains : this.addresses).add(rule.toLowerCase());
  }

  private get httpOptions() {
    return { [oauth.allowInsecureRequests]: this.provider.insecure, signal: AbortSignal.timeout(10_000) };
  }

  /** Whether the allow list lets this address in (no list: anyone the provider vouches for). */
  allowsEmail(email: string): boolean {
    if (this.addresses.size === 0 && this.domains.size === 0) return true;
    const lower = email.toLowerCase();
    return this.addresses.has(lower) || this.domains.has(lower.slice(lower.lastIndexOf("@")));
  }

  /** The email of a valid session cookie on this request, or undefined (none, expired, tampered, or no longer allowed). */
  async session(req: Request, host: string): Promise<string | undefined> {
    const token = cookieValue(req.headers.get("cookie"), SESSION_COOKIE);
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
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const authorize = new URL(this.provider.metadata.authorization_endpoint!);
    authorize.searchParams.set("client_id", this.client.client_id);
    authorize.searchParams.set("redirect_uri", redirectUri(host, secure));
    authorize.searchParams.set("response_type", "code");
    authorize.searchParams.set("scope", "openid email");
    authorize.searchParams.set("state", state);
    authorize.searchParams.set("nonce", nonce);
    authorize.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(verifier));
    authorize.searchParams.set("code_challenge_method", "S256");
    const flow = await new EncryptJWT({ state, nonce, verifier, to })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setIssuedAt()
      .setExpirationTime(`${FLOW_MAX_AGE_S}s`)
      .setAudience(host)
      .encrypt(this.flowKey);
    return new Response(null, {
      status: 302,
      headers: {
        Location: authorize.href,
        "Set-Cookie": cookie(FLOW_COOKIE, flow, { path: CALLBACK_PATH, maxAge: FLOW_MAX_AGE_S, secure }),
        "Cache-Control": "no-store",
      },
    });
  }

  /** The provider sent the visitor back: check state, trade the code (PKCE), check the ID token and nonce, then the email. */
  async callback(req: Request, url: URL, host: string, secure: boolean): Promise<Callback> {
    const sealed = cookieValue(req.headers.get("cookie"), FLOW_COOKIE);
    if (!sealed) return { kind: "refused", status: 400, why: "This sign-in has expired or was started in another browser. Open the page again to sign in." };
    let flow: { state: string; nonce: string; verifier: string; to: string };
    try {
      const { payload } = await jwtDecrypt(sealed, this.flowKey, { audience: host });
      flow = payload as unknown as typeof flow;
    } catch {
      return { kind: "refused", status: 400, why: "This sign-in has expired. Open the page again to sign in." };
    }
    const { metadata, keys } = this.provider;
    let email: unknown;
    let verified: unknown;
    try {
      const params = oauth.validateAuthResponse(metadata, this.client, url, flow.state);
      const res = await oauth.authorizationCodeGrantRequest(metadata, this.client, this.clientAuth, params, redirectUri(host, secure), flow.verifier, this.httpOptions);
      const tokens = await oauth.processAuthorizationCodeResponse(metadata, this.client, res, { expectedNonce: flow.nonce, requireIdToken: true, ...this.httpOptions });
      // oauth4webapi checks the ID token's claims; its signature is checked here, against the provider's published keys
      const { payload } = await jwtVerify(tokens.id_token!, keys, { issuer: metadata.issuer, audience: this.client.client_id });
      email = payload.email;
      verified = payload.email_verified;
      if (email === undefined && metadata.userinfo_endpoint) {
        const info = await oauth.processUserInfoResponse(
          metadata,
          this.client,
          payload.sub!,
          await oauth.userInfoRequest(metadata, this.client, tokens.access_token, this.httpOptions),
        );
        email = info.email;
        verified = info.email_verified;
      }
    } catch (err) {
      return { kind: "refused", status: 400, why: `The sign-in did not complete: ${describe(err)}` };
    }
    if (typeof email !== "string" || email === "") return { kind: "refused", status: 403, why: "The provider gave no email address for this account." };
    if (verified === false) return { kind: "refused", status: 403, why: `The provider has not verified ${email}.` };
    if (!this.allowsEmail(email)) return { kind: "refused", status: 403, why: `${email} may not reach this tunnel.` };
    const session = await new SignJWT({ email })
      .setProtectedHeader({ alg: "HS256" })
      .setIssuedAt()
      .setExpirationTime(`${SESSION_MAX_AGE_S}s`)
      .setAudience(host)
      .sign(this.sessionKey);
    return { kind: "signed-in", email, to: flow.to, cookie: cookie(SESSION_COOKIE, session, { path: "/", maxAge: SESSION_MAX_AGE_S, secure }) };
  }

  /** Set-Cookie that ends the sign-in flow's cookie (after the callback, either way). */
  static endFlow(secure: boolean): string {
    return cookie(FLOW_COOKIE, "", { path: CALLBACK_PATH, maxAge: 0, secure });
  }
}

function redirectUri(host: string, secure: boolean): string {
  return `${secure ? "https" : "http"}://${host}${CALLBACK_PATH}`;
}

function cookie(name: string, value: string, o: { path: string; maxAge: number; secure: boolean }): string {
  return [`${name}=${value}`, `Path=${o.path}`, `Max-Age=${o.maxAge}`, "HttpOnly", "SameSite=Lax", ...(o.secure ? ["Secure"] : [])].join("; ");
}

/** What went wrong, in words fit for the visitor's page (oauth4webapi's codes and messages carry no secrets). */
function describe(err: unknown): string {
  if (err instanceof oauth.AuthorizationResponseError) return `the provider answered ${err.error}${err.error_description ? ` (${err.error_description})` : ""}`;
  const e = err as { message?: string };
  return (e.message ?? "unknown error").split("\n")[0]!.slice(0, 200);
}
