/**
 * jwt-validation against tokens a real provider issues: `oidc-provider`
 * on loopback gives JWT access tokens by the client-credentials grant
 * (RFC 9068, through its resource indicators), and serves its key set;
 * the action fetches that key set with jose as it will at the edge. Good,
 * expired, for another audience, from another issuer, signed by another
 * key, with an algorithm not allowed, missing, in a cookie, in a body.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { generateKeyPair, SignJWT } from "jose";
import { defaultServices, RemoteKeySets, type PolicyServices } from "../../src/policy/index.ts";
import { startTokenIssuer, TOKEN_CLIENT as CLIENT, type TokenIssuer } from "../harness/oidc-provider.ts";
import { answered, policyOf, requestInput } from "./policy-harness.ts";
import { jwtValidation } from "../harness/jwt-policy.ts";

let provider: TokenIssuer;
let issuer: string;

beforeAll(async () => {
  provider = await startTokenIssuer();
  issuer = provider.issuer;
});

afterAll(() => provider?.[Symbol.asyncDispose]());

/** A JWT access token from the provider, for `resource` (its audience). */
const token = (resource = "urn:api") => provider.token(resource);

const policy = (services: PolicyServices, extra = "") =>
  policyOf(
    `
on_http_request:
  - actions:
${jwtValidation(issuer, `RS256${extra}`)}      - type: add-headers
        config: { headers: { x-sub: "\${visitor.identity}", x-aud: "\${actions.ngrok.jwt_validation.tokens[0].payload.aud}" } }
`,
    { services },
  );

const loopback = () => defaultServices({ httpLoopback: true, keySets: new RemoteKeySets() });
const bearer = (t: string) => requestInput({ headers: [["Authorization", `Bearer ${t}`]] });

describe("jwt-validation with oidc-provider's tokens and key set", () => {
  test("a good token passes; the visitor is its sub; its claims are in the action's variables", async () => {
    const out = await policy(loopback()).run("on_http_request", bearer(await token()));
    expect(out.verdict.kind).toBe("continue");
    expect(out.identity).toBe(CLIENT.client_id);
    expect(out.request!.headers).toContainEqual(["x-sub", CLIENT.client_id]);
    expect(out.request!.headers).toContainEqual(["x-aud", "urn:api"]);
  });

  test("expired: 401 with Bearer error=invalid_token, and why in the trace", async () => {
    const services = loopback();
    const t = await token();
    const later = Date.now() + 24 * 3600_000;
    const out = await policy({ ...services, now: () => later }).run("on_http_request", bearer(t));
    const a = answered(out)!;
    expect(a.status).toBe(401);
    expect(a.headers["www-authenticate"]).toBe('Bearer error="invalid_token"');
    expect(out.matched[0]!.actions[0]!.note).toBe("the token has expired");
  });

  test("for another audience: 401", async () => {
    const out = await policy(loopback()).run("on_http_request", bearer(await token("urn:other")));
    expect(answered(out)?.status).toBe(401);
    expect(out.matched[0]!.actions[0]!.note).toContain("aud");
  });

  test("signed by a key the key set does not hold, though its claims are right: 401", async () => {
    const { privateKey } = await generateKeyPair("RS256");
    const forged = await new SignJWT({ sub: "mallory" })
      .setProtectedHeader({ alg: "RS256", kid: "k1" })
      .setIssuer(issuer)
      .setAudience("urn:api")
      .setIssuedAt()
      .setExpirationTime("5m")
      .sign(privateKey);
    const out = await policy(loopback()).run("on_http_request", bearer(forged));
    expect(answered(out)?.status).toBe(401);
    expect(out.identity).toBeUndefined();
  });

  test("from an issuer not allowed, with an algorithm not allowed, or missing: 401", async () => {
    const t = await token();
    const otherIssuer = policyOf(
      `on_http_request:\n  - actions:\n      - type: jwt-validation\n        config:\n          issuer: { allow_list: [{ value: "https://someone.else" }] }\n          http: { tokens: [{ type: jwt, method: header, name: Authorization, prefix: "Bearer " }] }\n          jws: { allowed_algorithms: [RS256], keys: { sources: { additional_jkus: ["${issuer}/jwks"] } } }\n`,
      { services: loopback() },
    );
    expect(answered(await otherIssuer.run("on_http_request", bearer(t)))?.status).toBe(401);
    const es256Only = policyOf(
      `on_http_request:\n  - actions:\n      - type: jwt-validation\n        config:\n          issuer: { allow_list: [{ value: "${issuer}" }] }\n          http: { tokens: [{ type: jwt, method: header, name: Authorization, prefix: "Bearer " }] }\n          jws: { allowed_algorithms: [ES256], keys: { sources: { additional_jkus: ["${issuer}/jwks"] } } }\n`,
      { services: loopback() },
    );
    expect(answered(await es256Only.run("on_http_request", bearer(t)))?.status).toBe(401);
    const missing = await policy(loopback()).run("on_http_request", requestInput());
    expect(answered(missing)?.status).toBe(401);
    expect(missing.matched[0]!.actions[0]!.note).toBe("no token in the header Authorization");
  });

  test("the key set is fetched once and kept, not once per request", async () => {
    const services = loopback();
    const p = policy(services);
    const t = await token();
    const before = provider.jwksFetches;
    for (let i = 0; i < 5; i++) expect((await p.run("on_http_request", bearer(t))).verdict.kind).toBe("continue");
    expect(provider.jwksFetches - before).toBe(1);
  });

  test("a plain-http key set is taken only when the server allows loopback issuers (else https only)", async () => {
    const out = await policy(defaultServices({ httpLoopback: false })).run("on_http_request", bearer(await token()));
    expect(answered(out)?.status).toBe(401);
    expect(out.problems[0]!.message).toContain("not an https URL");
  });

  test("a token in a cookie (burrow's own method) or in a JSON body", async () => {
    const t = await token();
    const yaml = (method: string, name: string) =>
      `on_http_request:\n  - actions:\n      - type: jwt-validation\n        config:\n          issuer: { allow_list: [{ value: "${issuer}" }] }\n          http: { tokens: [{ type: jwt, method: ${method}, name: ${name} }] }\n          jws: { allowed_algorithms: [RS256], keys: { sources: { additional_jkus: ["${issuer}/jwks"] } } }\n`;
    const cookie = policyOf(yaml("cookie", "session"), { services: loopback() });
    expect((await cookie.run("on_http_request", requestInput({ headers: [["Cookie", `a=1; session=${t}`]] }))).verdict.kind).toBe("continue");
    const body = policyOf(yaml("body", "id_token"), { services: loopback() });
    expect(body.readsBody).toBe(true);
    const json = requestInput({ method: "POST", headers: [["Content-Type", "application/json"]], body: JSON.stringify({ id_token: t }) });
    expect((await body.run("on_http_request", json)).verdict.kind).toBe("continue");
  });

  test("at load: `none` and HMAC algorithms, and a JWKS URL with ${...} or not http(s), are refused", async () => {
    const { errorsOf } = await import("./policy-harness.ts");
    const errors = errorsOf(
      `on_http_request:\n  - actions:\n      - type: jwt-validation\n        config:\n          issuer: { allow_list: [{ value: x }] }\n          http: { tokens: [{ type: jwt, method: header, name: Authorization }] }\n          jws: { allowed_algorithms: [none, HS256], keys: { sources: { additional_jkus: ["https://\${req.host}/jwks", "ftp://keys"] } } }\n`,
    );
    expect(errors.map((e) => e.path)).toEqual([
      "on_http_request[0].actions[0].config.jws.allowed_algorithms[0]",
      "on_http_request[0].actions[0].config.jws.allowed_algorithms[1]",
      "on_http_request[0].actions[0].config.jws.keys.sources.additional_jkus[0]",
      "on_http_request[0].actions[0].config.jws.keys.sources.additional_jkus[1]",
    ]);
  });
});
