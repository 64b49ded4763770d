/**
 * The OpenID Connect authorization code flow as a relying party, shared by
 * the sign-in in front of a tunnel (oidc.ts) and the portal's company
 * sign-in (portal/oidc.ts): PKCE, state and nonce (oauth4webapi), the ID
 * token's signature checked against the provider's keys (jose). The flow's
 * own secrets (state, nonce, code verifier, and what the caller carries
 * through it) wait in an encrypted cookie scoped to the callback path, so
 * nothing is kept per visitor.
 *
 * Keys come from a secret of this server process, or of the cluster
 * (shareSessions), so that every node of a cluster finishes a sign-in any
 * of them started.
 */
import { createHash, createHmac } from "node:crypto";
import { EncryptJWT, jwtDecrypt, jwtVerify } from "jose";
import * as oauth from "oauth4webapi";
import type { OidcProvider } from "./oidc-discovery.ts";

/** A sign-in must come back within this. */
const FLOW_MAX_AGE_S = 10 * 60;

/** The secret every flow's and session's keys are derived from: this process's own, or the cluster's. */
let processSecret: Uint8Array = crypto.getRandomValues(new Uint8Array(32));

/** Several nodes: sessions and sign-ins that every node holding `clusterSecret` honours. Call before any sign-in. */
export function shareSessions(clusterSecret: string): void {
  // its own label, so that no other use of the cluster secret (the nodes' HMAC) gives the same key
  processSecret = createHmac("sha256", clusterSecret).update("burrow oidc session secret").digest();
}

export interface OidcClientSettings {
  clientId: string;
  clientSecret: string;
}

/**
 * Keys for one use of one provider and client: `label` sets the use apart
 * (a tunnel's name, "portal"), so that a cookie of one is nothing to another.
 */
export function deriveKeys(label: string, issuer: string, settings: OidcClientSettings): { session: Uint8Array; flow: Uint8Array } {
  const base = createHmac("sha256", processSecret)
    .update([label, issuer, settings.clientId, createHash("sha256").update(settings.clientSecret).digest("hex")].join("\n"))
    .digest();
  return { session: createHmac("sha256", base).update("session").digest(), flow: createHmac("sha256", base).update("flow").digest() };
}

/** What the provider says of the person, as far as burrow reads it. */
export interface OidcClaims {
  /** The provider's stable id of the person. */
  sub: string;
  email?: string;
  /** undefined when the provider does not say. */
  emailVerified?: boolean;
  /** The `groups` claim, when the provider gives one. */
  groups?: string[];
}

export type FlowEnd = { kind: "ok"; claims: OidcClaims; carried: Record<string, string> } | { kind: "refused"; status: 400; why: string };

export interface FlowOptions {
  callbackPath: string;
  flowCookie: string;
  /** Scopes asked for; "openid email" by default. */
  scope?: string;
  /** Ask the userinfo endpoint for `groups` when the ID token lacks them. */
  wantGroups?: boolean;
  /** More parameters for the authorization URL (a policy's `authz_url_params`); the flow's own are never replaced. */
  authorizeParams?: Readonly<Record<string, string>>;
}

export class OidcFlow {
  private readonly client: oauth.Client;
  private readonly clientAuth: oauth.ClientAuth;

  constructor(
    private readonly provider: OidcProvider,
    settings: OidcClientSettings,
    private readonly flowKey: Uint8Array,
    private readonly options: FlowOptions,
  ) {
    this.client = { client_id: settings.clientId };
    const methods = provider.metadata.token_endpoint_auth_methods_supported;
    this.clientAuth = !methods || methods.includes("client_secret_basic") ? oauth.ClientSecretBasic(settings.clientSecret) : oauth.ClientSecretPost(settings.clientSecret);
  }

  private get httpOptions() {
    return { [oauth.allowInsecureRequests]: this.provider.insecure, signal: AbortSignal.timeout(10_000) };
  }

  redirectUri(host: string, secure: boolean): string {
    return `${secure ? "https" : "http"}://${host}${this.options.callbackPath}`;
  }

  /** Where to send the person to sign in, and the flow's cookie (carrying `carried` through, encrypted). */
  async start(host: string, secure: boolean, carried: Record<string, string>): Promise<{ location: string; cookie: string }> {
    const verifier = oauth.generateRandomCodeVerifier();
    const state = oauth.generateRandomState();
    const nonce = oauth.generateRandomNonce();
    const authorize = new URL(this.provider.metadata.authorization_endpoint!);
    for (const [name, value] of Object.entries(this.options.authorizeParams ?? {})) authorize.searchParams.set(name, value);
    authorize.searchParams.set("client_id", this.client.client_id);
    authorize.searchParams.set("redirect_uri", this.redirectUri(host, secure));
    authorize.searchParams.set("response_type", "code");
    authorize.searchParams.set("scope", this.options.scope ?? "openid email");
    authorize.searchParams.set("state", state);
    authorize.searchParams.set("nonce", nonce);
    authorize.searchParams.set("code_challenge", await oauth.calculatePKCECodeChallenge(verifier));
    authorize.searchParams.set("code_challenge_method", "S256");
    const flow = await new EncryptJWT({ state, nonce, verifier, carried })
      .setProtectedHeader({ alg: "dir", enc: "A256GCM" })
      .setIssuedAt()
      .setExpirationTime(`${FLOW_MAX_AGE_S}s`)
      .setAudience(host)
      .encrypt(this.flowKey);
    return { location: authorize.href, cookie: oidcCookie(this.options.flowCookie, flow, { path: this.options.callbackPath, maxAge: FLOW_MAX_AGE_S, secure }) };
  }

  /** The provider sent the person back: check state, trade the code (PKCE), check the ID token and nonce. */
  async finish(req: Request, url: URL, host: string, secure: boolean): Promise<FlowEnd> {
    const sealed = cookieValue(req.headers.get("cookie"), this.options.flowCookie);
    if (!sealed) return { kind: "refused", status: 400, why: "This sign-in has expired or was started in another browser. Open the page again to sign in." };
    let flow: { state: string; nonce: string; verifier: string; carried: Record<string, string> };
    try {
      const { payload } = await jwtDecrypt(sealed, this.flowKey, { audience: host });
      flow = payload as unknown as typeof flow;
    } catch {
      return { kind: "refused", status: 400, why: "This sign-in has expired. Open the page again to sign in." };
    }
    const { metadata, keys } = this.provider;
    try {
      const params = oauth.validateAuthResponse(metadata, this.client, url, flow.state);
      const res = await oauth.authorizationCodeGrantRequest(metadata, this.client, this.clientAuth, params, this.redirectUri(host, secure), flow.verifier, this.httpOptions);
      const tokens = await oauth.processAuthorizationCodeResponse(metadata, this.client, res, { expectedNonce: flow.nonce, requireIdToken: true, ...this.httpOptions });
      // oauth4webapi checks the ID token's claims; its signature is checked here, against the provider's published keys
      const { payload } = await jwtVerify(tokens.id_token!, keys, { issuer: metadata.issuer, audience: this.client.client_id });
      const claims: Record<string, unknown> = { ...payload };
      const lacking = claims.email === undefined || (this.options.wantGroups === true && claims.groups === undefined);
      if (lacking && metadata.userinfo_endpoint) {
        const info = await oauth.processUserInfoResponse(metadata, this.client, payload.sub!, await oauth.userInfoRequest(metadata, this.client, tokens.access_token, this.httpOptions));
        for (const [k, v] of Object.entries(info)) if (claims[k] === undefined) claims[k] = v;
      }
      const groups = Array.isArray(claims.groups) ? claims.groups.filter((g): g is string => typeof g === "string") : undefined;
      return {
        kind: "ok",
        carried: flow.carried ?? {},
        claims: {
          sub: String(payload.sub),
          email: typeof claims.email === "string" && claims.email !== "" ? claims.email : undefined,
          emailVerified: typeof claims.email_verified === "boolean" ? claims.email_verified : undefined,
          groups,
        },
      };
    } catch (err) {
      return { kind: "refused", status: 400, why: `The sign-in did not complete: ${describe(err)}` };
    }
  }

  /** Set-Cookie that ends the sign-in flow's cookie (after the callback, either way). */
  endFlow(secure: boolean): string {
    return oidcCookie(this.options.flowCookie, "", { path: this.options.callbackPath, maxAge: 0, secure });
  }
}

/** The value of cookie `name` in a Cookie header, or undefined. */
export function cookieValue(header: string | null, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

export function oidcCookie(name: string, value: string, o: { path: string; maxAge: number; secure: boolean }): string {
  return [`${name}=${value}`, `Path=${o.path}`, `Max-Age=${o.maxAge}`, "HttpOnly", "SameSite=Lax", ...(o.secure ? ["Secure"] : [])].join("; ");
}

/** What went wrong, in words fit for the person's page (oauth4webapi's codes and messages carry no secrets). */
function describe(err: unknown): string {
  if (err instanceof oauth.AuthorizationResponseError) return `the provider answered ${err.error}${err.error_description ? ` (${err.error_description})` : ""}`;
  const e = err as { message?: string };
  return (e.message ?? "unknown error").split("\n")[0]!.slice(0, 200);
}
