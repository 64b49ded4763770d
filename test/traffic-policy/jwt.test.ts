/**
 * jwt-validation through a real tunnel: tokens issued by a real OpenID
 * provider (`oidc-provider` on loopback, JWT access tokens by the
 * client-credentials grant), whose key set the edge fetches with jose
 * (plain http on loopback, allowed by the server's --oidc-http-issuers
 * loopback). Good, expired (signed with the provider's key), for another
 * audience, signed by another key, missing; curl as the client.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from "jose";
import Provider from "oidc-provider";
import { withPolicy, type Echoed, type PolicyTunnel } from "./rig.ts";

const CLIENT = { client_id: "svc", client_secret: "svc-secret-0123456789abcdef" };
let http: Server;
let issuer: string;
let providerKey: CryptoKey;
let t: PolicyTunnel;

beforeAll(async () => {
  http = createServer();
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve));
  issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;
  const { privateKey } = await generateKeyPair("RS256", { extractable: true });
  providerKey = privateKey;
  const provider = new Provider(issuer, {
    clients: [{ ...CLIENT, grant_types: ["client_credentials"], redirect_uris: [], response_types: [], token_endpoint_auth_method: "client_secret_post" }],
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
  http.on("request", provider.callback());
  t = await withPolicy(
    `
on_http_request:
  - actions:
      - type: jwt-validation
        config:
          issuer: { allow_list: [{ value: "${issuer}" }] }
          audience: { allow_list: [{ value: "urn:api" }] }
          http:
            tokens: [{ type: access_token, method: header, name: Authorization, prefix: "Bearer " }]
          jws:
            allowed_algorithms: [RS256]
            keys: { sources: { additional_jkus: ["${issuer}/jwks"] } }
      - type: add-headers
        config: { headers: { x-sub: "\${visitor.identity}" } }
`,
    { server: { args: ["--oidc-http-issuers", "loopback"] } },
  );
}, 30_000);

afterAll(async () => {
  await t?.close();
  http?.closeAllConnections();
  await new Promise<void>((resolve) => http?.close(() => resolve()));
});

/** A JWT access token from the provider, for `resource` (its audience). */
async function token(resource = "urn:api"): Promise<string> {
  const res = await fetch(`${issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ grant_type: "client_credentials", resource, scope: "read", ...CLIENT }),
  });
  const body = (await res.json()) as { access_token?: string };
  if (!body.access_token) throw new Error(`no token: ${JSON.stringify(body)}`);
  return body.access_token;
}

const bearer = (jwt: string) => ["-H", `Authorization: Bearer ${jwt}`];

describe("jwt-validation on a live tunnel", () => {
  test("a good token passes, its sub the visitor the service is told of", async () => {
    const r = await t.curl("/", bearer(await token()));
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as Echoed).headers["x-sub"]).toBe(CLIENT.client_id);
  });

  test("missing, expired, for another audience, signed by another key: 401 with Bearer error=invalid_token, the service not reached", async () => {
    const missing = await t.curl("/");
    expect(missing.status).toBe(401);
    expect(missing.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
    const expired = await new SignJWT({ sub: "late" })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(issuer)
      .setAudience("urn:api")
      .setIssuedAt(Math.floor(Date.now() / 1000) - 7200)
      .setExpirationTime(Math.floor(Date.now() / 1000) - 3600)
      .sign(providerKey);
    expect((await t.curl("/", bearer(expired))).status).toBe(401);
    expect((await t.curl("/", bearer(await token("urn:other")))).status).toBe(401);
    const { privateKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ sub: "mallory" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(issuer).setAudience("urn:api").setIssuedAt().setExpirationTime("5m").sign(privateKey);
    const r = await t.curl("/", bearer(forged));
    expect(r.status).toBe(401);
    expect(r.body).not.toContain("mallory");
  });
});
