/**
 * jwt-validation through a real tunnel: tokens issued by a real OpenID
 * provider (`oidc-provider` on loopback, JWT access tokens by the
 * client-credentials grant), whose key set the edge fetches with jose
 * (plain http on loopback, allowed by the server's --oidc-http-issuers
 * loopback). Good, expired (signed with the provider's key), for another
 * audience, signed by another key, missing; curl as the client.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPair, SignJWT } from "jose";
import { startTokenIssuer, TOKEN_CLIENT as CLIENT, type TokenIssuer } from "../harness/oidc-provider.ts";
import { withPolicy, type Echoed, type PolicyTunnel } from "./rig.ts";
import { jwtValidation } from "../harness/jwt-policy.ts";

let provider: TokenIssuer;
let issuer: string;
let t: PolicyTunnel;

beforeAll(async () => {
  provider = await startTokenIssuer();
  issuer = provider.issuer;
  t = await withPolicy(
    `
on_http_request:
  - actions:
${jwtValidation(issuer)}      - type: add-headers
        config: { headers: { x-sub: "\${visitor.identity}" } }
`,
    { server: { args: ["--oidc-http-issuers", "loopback"] } },
  );
}, 30_000);

afterAll(async () => {
  await t?.close();
  await provider?.[Symbol.asyncDispose]();
});

/** A JWT access token from the provider, for `resource` (its audience). */
const token = (resource = "urn:api") => provider.token(resource);

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
      .sign(provider.key);
    expect((await t.curl("/", bearer(expired))).status).toBe(401);
    expect((await t.curl("/", bearer(await token("urn:other")))).status).toBe(401);
    const { privateKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ sub: "mallory" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(issuer).setAudience("urn:api").setIssuedAt().setExpirationTime("5m").sign(privateKey);
    const r = await t.curl("/", bearer(forged));
    expect(r.status).toBe(401);
    expect(r.body).not.toContain("mallory");
  });
});
