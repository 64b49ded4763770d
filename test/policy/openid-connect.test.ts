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
      { target: "/x?y=1", secure: true, settings: { issuer: "https://accounts.example.com", clientId: "burrow", clientSecret: "s3cret-client-secret", scopes: ["openid", "email"], allowEmails: ["@example.com"] } },
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
});
