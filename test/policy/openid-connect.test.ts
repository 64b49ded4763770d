/**
 * openid-connect: the action's config checked as today's --oidc-* flags
 * are, and its run through the adapter the edge plugs in (the sign-in
 * itself is the edge's, edge/access/oidc.ts): a visitor sent to sign in,
 * and one signed in, passed on as X-Burrow-User-Email with the edge's own
 * cookie taken off and a visitor-sent identity header dropped. Without an
 * adapter the action answers 503, never lets the request through.
 */
import { describe, expect, test } from "bun:test";
import { defaultServices, type OidcAdapter } from "../../src/policy/index.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const yaml = `
on_http_request:
  - actions:
      - type: openid-connect
        config:
          issuer_url: https://accounts.example.com
          client_id: burrow
          client_secret: s3cret-client-secret
          scopes: [openid, email]
          allow_emails: ["@example.com"]
`;

describe("openid-connect", () => {
  test("signed in: the email is the identity and goes to the service; the edge's cookie and a forged identity header do not", async () => {
    const asked: unknown[] = [];
    const oidc: OidcAdapter = {
      async admit(request, settings) {
        asked.push({ target: request.target, secure: request.secure, settings });
        return { kind: "signed-in", email: "ann@example.com", stripCookies: ["burrow_session"] };
      },
    };
    const p = policyOf(yaml, { services: defaultServices({ oidc }) });
    const out = await p.run("on_http_request", requestInput({ target: "/x?y=1", headers: [["Cookie", "burrow_session=abc; theirs=1"], ["X-Burrow-User-Email", "forged@evil.example"]] }));
    expect(out.verdict.kind).toBe("continue");
    expect(out.identity).toBe("ann@example.com");
    const h = out.request!.headers;
    expect(h).toContainEqual(["Cookie", "theirs=1"]);
    expect(h.filter(([n]) => n.toLowerCase() === "x-burrow-user-email")).toEqual([["x-burrow-user-email", "ann@example.com"]]);
    expect(asked).toEqual([
      {
        target: "/x?y=1",
        secure: true,
        settings: { issuer: "https://accounts.example.com", clientId: "burrow", clientSecret: "s3cret-client-secret", scopes: ["openid", "email"], allowEmails: ["@example.com"], maxSessionS: 12 * 3600 },
      },
    ]);
  });

  test("not signed in: the adapter's answer (the provider's redirect) is given", async () => {
    const oidc: OidcAdapter = { admit: async () => ({ kind: "respond", response: { status: 302, headers: [["location", "https://accounts.example.com/authorize?x"]], body: "" } }) };
    const out = await policyOf(yaml, { services: defaultServices({ oidc }) }).run("on_http_request", requestInput());
    expect(answered(out)).toMatchObject({ status: 302, headers: { location: "https://accounts.example.com/authorize?x" } });
  });

  test("without a sign-in plugged in: 503, never through", async () => {
    const out = await policyOf(yaml, { services: defaultServices() }).run("on_http_request", requestInput());
    expect(answered(out)?.status).toBe(503);
  });

  test("the config is checked as --oidc-issuer is: https (http on loopback), no credentials in the URL, email rules; the secret never quoted", () => {
    const errors = errorsOf(yaml.replace("https://accounts.example.com", "http://accounts.example.com").replace('"@example.com"', '"not an email"'));
    expect(errors.map((e) => e.path)).toEqual(["on_http_request[0].actions[0].config.issuer_url", "on_http_request[0].actions[0].config.allow_emails[0]"]);
    expect(JSON.stringify(errors)).not.toContain("s3cret");
  });

  test("ngrok's other fields: auth_id, authz_url_params, max_session_duration and scopes (openid and email always asked) reach the sign-in", async () => {
    let seen: unknown;
    const oidc: OidcAdapter = {
      async admit(_request, settings) {
        seen = settings;
        return { kind: "signed-in", email: "ann@example.com", stripCookies: [] };
      },
    };
    const p = policyOf(
      yaml.replace("scopes: [openid, email]", "scopes: [groups]\n          auth_id: corp\n          authz_url_params: { prompt: login }\n          max_session_duration: 2h"),
      { services: defaultServices({ oidc }) },
    );
    await p.run("on_http_request", requestInput());
    expect(seen).toMatchObject({ scopes: ["openid", "email", "groups"], authId: "corp", authorizeParams: { prompt: "login" }, maxSessionS: 7200 });
  });

  test("allow_cors_preflight: a preflight passes unsigned; without it, or for any other request, the sign-in is asked", async () => {
    let asked = 0;
    const oidc: OidcAdapter = { admit: async () => (asked++, { kind: "respond", response: { status: 401, headers: [], body: "" } }) };
    const preflight = requestInput({ method: "OPTIONS", headers: [["Origin", "https://app.example.com"], ["Access-Control-Request-Method", "POST"]] });
    const open = policyOf(yaml.replace("scopes: [openid, email]", "scopes: [openid, email]\n          allow_cors_preflight: true"), { services: defaultServices({ oidc }) });
    expect((await open.run("on_http_request", preflight)).verdict.kind).toBe("continue");
    expect(asked).toBe(0);
    expect(answered(await open.run("on_http_request", requestInput({ method: "OPTIONS" })))?.status).toBe(401);
    const shut = policyOf(yaml, { services: defaultServices({ oidc }) });
    expect(answered(await shut.run("on_http_request", preflight))?.status).toBe(401);
    expect(asked).toBe(2);
  });

  test("refused at load: a flow parameter in authz_url_params, a session past 720h, an auth_id that cannot name a cookie", () => {
    const config = (more: string) => yaml.replace("scopes: [openid, email]", `scopes: [openid, email]\n          ${more}`);
    const checked = errorsOf(config("authz_url_params: { state: x }\n          max_session_duration: 9000h"));
    expect(checked.map((e) => e.path).sort()).toEqual(["on_http_request[0].actions[0].config.authz_url_params.state", "on_http_request[0].actions[0].config.max_session_duration"]);
    expect(errorsOf(config('auth_id: "a b"')).map((e) => e.path)).toEqual(["on_http_request[0].actions[0].config.auth_id"]);
  });
});
