/**
 * Real OpenID providers for tests: `oidc-provider` (the certified Node
 * implementation) on 127.0.0.1, port 0. startOidcProvider: one
 * confidential test client and its development sign-in pages (any login is
 * an account; its email is looked up in `emails`), for the code flow.
 * startTokenIssuer: JWT access tokens by the client-credentials grant,
 * for jwt-validation. Use with `await using`.
 */
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, type CryptoKey } from "jose";
import Provider from "oidc-provider";
import type { BrowserContext, Page } from "playwright-core";

export const TEST_CLIENT_ID = "burrow-test-client";
export const TEST_CLIENT_SECRET = "burrow-test-client-secret-0123456789";

export interface TestProvider extends AsyncDisposable {
  /** http://127.0.0.1:<port>: what --oidc-issuer takes. */
  issuer: string;
  /** Token requests the provider answered (each sign-in makes one). */
  tokenRequests: number;
}

export async function startOidcProvider(opts: { redirectUris: string[]; emails: Record<string, string>; groups?: Record<string, string[]> }): Promise<TestProvider> {
  const http: Server = createServer();
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: TEST_CLIENT_ID,
        client_secret: TEST_CLIENT_SECRET,
        redirect_uris: opts.redirectUris,
        response_types: ["code"],
        grant_types: ["authorization_code"],
        token_endpoint_auth_method: "client_secret_basic",
      },
    ],
    claims: { openid: ["sub"], email: ["email", "email_verified"], groups: ["groups"] },
    async findAccount(_ctx: unknown, id: string) {
      return { accountId: id, claims: async () => ({ sub: id, email: opts.emails[id] ?? `${id}@unknown.invalid`, email_verified: true, groups: opts.groups?.[id] ?? [] }) };
    },
    pkce: { required: () => true },
    cookies: { keys: ["burrow-test-cookie-key"] },
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: "test-key", alg: "RS256", use: "sig" }] },
    ttl: { Interaction: 600, Session: 3600, Grant: 3600, AccessToken: 600, IdToken: 600, AuthorizationCode: 60 },
    features: { devInteractions: { enabled: true } },
  } as never);
  const state: TestProvider = {
    issuer,
    tokenRequests: 0,
    async [Symbol.asyncDispose]() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
  provider.on("grant.success", () => state.tokenRequests++);
  const callback = provider.callback();
  http.on("request", (req, res) => callback(req, res));
  return state;
}

/** The confidential client of the token issuer: client credentials, its secret sent in the body. */
export const TOKEN_CLIENT = { client_id: "svc", client_secret: "svc-secret-0123456789abcdef" };

export interface TokenIssuer extends AsyncDisposable {
  /** http://127.0.0.1:<port>: the tokens' `iss`; its key set is at `${issuer}/jwks`. */
  issuer: string;
  /** The provider's signing key (kid "k1"), for tokens the provider would not issue (expired ones). */
  key: CryptoKey;
  /** Fetches of the key set so far. */
  jwksFetches: number;
  /** A JWT access token (RFC 9068) for `resource`, its audience (default "urn:api"); its `sub` is the client id. */
  token(resource?: string): Promise<string>;
}

/**
 * A real OpenID provider that issues JWT access tokens by the
 * client-credentials grant (through its resource indicators), on
 * 127.0.0.1, port 0: what jwt-validation checks. Use with `await using`.
 */
export async function startTokenIssuer(): Promise<TokenIssuer> {
  const http: Server = createServer();
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  const provider = new Provider(issuer, {
    clients: [{ ...TOKEN_CLIENT, grant_types: ["client_credentials"], redirect_uris: [], response_types: [], token_endpoint_auth_method: "client_secret_post" }],
    jwks: { keys: [{ ...(await exportJWK(privateKey)), kid: "k1", alg: "RS256", use: "sig" }] },
    features: {
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => "urn:api",
        useGrantedResource: () => true,
        getResourceServerInfo: (_ctx: unknown, resource: string) => ({ scope: "read", audience: resource, accessTokenFormat: "jwt", jwt: { sign: { alg: "RS256" } } }),
      },
    },
  } as never);
  const callback = provider.callback();
  const state: TokenIssuer = {
    issuer,
    key: privateKey,
    jwksFetches: 0,
    async token(resource = "urn:api") {
      const res = await fetch(`${issuer}/token`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "read", ...TOKEN_CLIENT }),
      });
      const body = (await res.json()) as { access_token?: string };
      if (!body.access_token) throw new Error(`no token: ${JSON.stringify(body)}`);
      return body.access_token;
    },
    async [Symbol.asyncDispose]() {
      http.closeAllConnections();
      await new Promise<void>((resolve) => http.close(() => resolve()));
    },
  };
  http.on("request", (req, res) => {
    if (req.url?.startsWith("/jwks")) state.jwksFetches++;
    callback(req, res);
  });
  return state;
}

/** Keeps a browser on loopback: the provider's sign-in page links a web font, and nothing may leave the machine. */
export async function loopbackOnly(context: BrowserContext): Promise<void> {
  await context.route("**/*", (route) => {
    const host = new URL(route.request().url()).hostname;
    return host === "127.0.0.1" || host.endsWith("localhost") ? route.continue() : route.abort();
  });
}

/** Signs in at the provider's development pages as `login`, from a page already sent there. */
export async function signInAtProvider(page: Page, provider: TestProvider, login: string, beforeSubmit?: () => Promise<void>): Promise<void> {
  await page.waitForURL((u) => u.href.startsWith(provider.issuer), { timeout: 10_000 });
  await beforeSubmit?.();
  await page.locator('input[name="login"]').fill(login);
  await page.locator('input[name="password"]').fill("any password");
  await page.locator('button[type="submit"]').click();
  // the provider asks once to share the email with the client
  await page.locator('button[type="submit"]', { hasText: "Continue" }).click();
}
