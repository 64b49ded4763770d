/**
 * openid-connect at the edge, end to end: a real provider (oidc-provider
 * on loopback, test/harness/oidc-provider.ts), a real server and agent
 * whose policy names it, and headless Chromium signing in through the
 * tunnel. The action is today's --oidc-issuer sign-in: the provider's
 * code flow, the callback, a session cookie; after it `visitor.identity`
 * is the email, and the service is told it in X-Burrow-User-Email. An
 * email the policy does not allow is refused; a tampered cookie is worth
 * nothing; scripts get 401; the logout path ends the session; an
 * operator's sign-in (its own auth_id, so its own cookies) and the
 * tunnel's own hold one after the other on one host; and the tunnel's
 * --oidc flags are this action in its flags layer, so its policy file sees
 * the request as the sign-in left it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { loopbackOnly, signInAtProvider, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";
import { policyFile } from "./rig.ts";

const SUB = "sso-policy";
const OTHER = "sso-layers";
const FLAGS = "sso-flags";
let rig: Rig;
let provider: TestProvider;
let browser: TestBrowser;
let agent: TestAgent;
let tunnelUrl: string;
let otherUrl: string;
let files: Disposable[] = [];

const service = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => Response.json({ path: new URL(req.url).pathname + new URL(req.url).search, headers: Object.fromEntries(req.headers) }),
});

const signInPolicy = (issuer: string, extra = "") => `
on_http_request:
  - actions:
      - type: openid-connect
        config:
          issuer_url: "${issuer}"
          client_id: ${TEST_CLIENT_ID}
          client_secret: ${TEST_CLIENT_SECRET}
          allow_emails: ["@example.com"]${extra}
      - type: add-headers
        config: { headers: { x-identity: "\${visitor.identity}" } }
`;

beforeAll(async () => {
  // the test provider is plain http on loopback, which a server allows only when told to
  rig = await withServer({ server: { args: ["--oidc-http-issuers", "loopback"] }, username: "sso-owner" });
  tunnelUrl = `http://${SUB}.localhost:${rig.server.edgePort}`;
  otherUrl = `http://${OTHER}.localhost:${rig.server.edgePort}`;
  provider = await startOidcProvider({
    redirectUris: [`${tunnelUrl}/_burrow/oidc/callback`, `${otherUrl}/_burrow/oidc/callback`, `http://${FLAGS}.localhost:${rig.server.edgePort}/_burrow/oidc/callback`],
    emails: { alice: "alice@example.com", mallory: "mallory@evil.example.org" },
  });
  const file = policyFile(signInPolicy(provider.issuer));
  files.push(file);
  agent = await rig.startAgent({ kind: "http", target: service.port!, args: ["--subdomain", SUB, "--no-inspect", "--policy-file", file.path] });
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await rig?.close();
  await provider?.[Symbol.asyncDispose]();
  service.stop(true);
  for (const f of files) f[Symbol.dispose]();
});

const session = async (url = tunnelUrl, name = "burrow_session") => (await browser.context.cookies(url)).find((c) => c.name === name);

describe("a browser signs in through the tunnel's policy", () => {
  test("sent to the provider (PKCE, state, nonce), back with a session cookie, then the service, told the email; visitor.identity is the email", async () => {
    const first = await tunnelFetch(rig.server.edgePort, SUB, "/reports?year=2026", { headers: { accept: "text/html" } });
    expect(first.status).toBe(302);
    const authorize = new URL(first.headers.get("location")!);
    expect(authorize.origin).toBe(provider.issuer);
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("redirect_uri")).toBe(`${tunnelUrl}/_burrow/oidc/callback`);
    expect(authorize.searchParams.get("scope")!.split(" ")).toEqual(expect.arrayContaining(["openid", "email"]));

    const { page } = browser;
    await page.goto(`${tunnelUrl}/reports?year=2026`);
    await signInAtProvider(page, provider, "alice");
    // signed in: the browser warning comes next (authentication first), then the page asked for
    await page.getByRole("link", { name: "Continue to the site" }).click();
    await page.waitForURL(`${tunnelUrl}/reports?year=2026`);
    const seen = JSON.parse((await page.locator("body").innerText()).trim());
    expect(seen.path).toBe("/reports?year=2026");
    expect(seen.headers["x-burrow-user-email"]).toBe("alice@example.com");
    expect(seen.headers["x-identity"]).toBe("alice@example.com");
    // the edge's session cookie is its own: the service never gets it
    expect(seen.headers.cookie ?? "").not.toContain("burrow_session");
    expect(await session()).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
  }, 30_000);

  test("the session cookie lets a script in; an email header the visitor sends is replaced; tampered or missing: 401", async () => {
    const cookie = (await session())!;
    const ok = await tunnelFetch(rig.server.edgePort, SUB, "/api", { headers: { cookie: `burrow_session=${cookie.value}`, "x-burrow-user-email": "ceo@example.com" } });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { headers: Record<string, string> }).headers["x-burrow-user-email"]).toBe("alice@example.com");
    const [header, payload, signature] = cookie.value.split(".");
    const forged = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), email: "boss@example.com" })).toString("base64url");
    for (const value of [`${header}.${forged}.${signature}`, "garbage", undefined]) {
      const r = await tunnelFetch(rig.server.edgePort, SUB, "/api", { headers: value === undefined ? {} : { cookie: `burrow_session=${value}` } });
      expect(r.status).toBe(401);
      expect(r.headers.get("www-authenticate")).toMatch(/^Burrow-OIDC realm=/);
    }
  });

  test("the logout path ends the session cookie and goes back to /", async () => {
    const cookie = (await session())!;
    const out = await tunnelFetch(rig.server.edgePort, SUB, "/_burrow/oidc/logout", { headers: { cookie: `burrow_session=${cookie.value}` } });
    expect(out.status).toBe(302);
    expect(out.headers.get("location")).toBe("/");
    expect(out.headers.getSetCookie().some((c) => c.startsWith("burrow_session=;") && c.includes("Max-Age=0"))).toBe(true);
  });

  test("a callback without the sign-in's own cookie (a forged or replayed state) is refused", async () => {
    const res = await tunnelFetch(rig.server.edgePort, SUB, "/_burrow/oidc/callback?code=abc&state=forged", { headers: { accept: "text/html" } });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("expired");
  });

  test("an email the policy does not allow is refused after signing in, and gets no session", async () => {
    const { page, context } = browser;
    await context.clearCookies();
    await page.goto(`${tunnelUrl}/`);
    await signInAtProvider(page, provider, "mallory");
    await page.getByText("mallory@evil.example.org may not reach this tunnel").waitFor();
    expect(await session()).toBeUndefined();
  }, 30_000);
});

describe("an operator's sign-in and the tunnel's own on one host", () => {
  test("each keeps its cookies (auth_id): the visitor signs in to the operator's, then the tunnel's, and is let through", async () => {
    const made = await rig.api.post("/api/policies", {
      name: "corp sign-in",
      scope: "hostname",
      hostname: `${OTHER}.localhost`,
      policy: signInPolicy(provider.issuer, "\n          auth_id: corp").replace(/ {6}- type: add-headers[\s\S]*$/, ""),
    });
    expect(made.status).toBe(201);
    const file = policyFile(signInPolicy(provider.issuer));
    files.push(file);
    await rig.startAgent({ kind: "http", target: service.port!, args: ["--subdomain", OTHER, "--no-inspect", "--policy-file", file.path] });
    const { page, context } = browser;
    await context.clearCookies();
    await page.goto(`${otherUrl}/both`);
    // the operator's first: its own cookies
    await signInAtProvider(page, provider, "alice");
    await page.waitForURL((u) => u.href.startsWith(provider.issuer) || u.href === `${otherUrl}/both`, { timeout: 10_000 });
    // then the tunnel's own (the provider may remember the consent: it sends the browser straight back)
    if (page.url().startsWith(provider.issuer)) await signInAtProvider(page, provider, "alice");
    await page.getByRole("link", { name: "Continue to the site" }).click();
    await page.waitForURL(`${otherUrl}/both`);
    const seen = JSON.parse((await page.locator("body").innerText()).trim());
    expect(seen.headers["x-burrow-user-email"]).toBe("alice@example.com");
    expect(await session(otherUrl, "burrow_session_corp")).toBeDefined();
    expect(await session(otherUrl, "burrow_session")).toBeDefined();
    expect(seen.headers.cookie ?? "").not.toContain("burrow_session");
  }, 60_000);
});

describe("the tunnel's --oidc flags, as the openid-connect action of its flags layer", () => {
  test("signed in, the tunnel's policy file sees the request as the sign-in left it: the email in X-Burrow-User-Email and visitor.identity, no session cookie", async () => {
    const flagsUrl = `http://${FLAGS}.localhost:${rig.server.edgePort}`;
    const file = policyFile(`
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            x-identity: "\${visitor.identity}"
            x-file-saw-email: "\${getReqHeader('x-burrow-user-email').join(',')}"
            x-file-saw-session: "\${'burrow_session' in req.cookies}"
`);
    files.push(file);
    await rig.startAgent({
      kind: "http",
      target: service.port!,
      args: ["--subdomain", FLAGS, "--no-inspect", "--policy-file", file.path, "--oidc-issuer", provider.issuer, "--oidc-client-id", TEST_CLIENT_ID, "--oidc-allow-email", "@example.com"],
      env: { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET },
    });
    // not signed in: the flags' sign-in answers before the file's rules, as --oidc always has
    const script = await tunnelFetch(rig.server.edgePort, FLAGS, "/api");
    expect(script.status).toBe(401);
    expect(script.headers.get("www-authenticate")).toMatch(/^Burrow-OIDC realm=/);
    const { page, context } = browser;
    await context.clearCookies();
    await page.goto(`${flagsUrl}/flagged`);
    await signInAtProvider(page, provider, "alice");
    await page.getByRole("link", { name: "Continue to the site" }).click();
    await page.waitForURL(`${flagsUrl}/flagged`);
    const seen = JSON.parse((await page.locator("body").innerText()).trim());
    expect(seen.headers["x-burrow-user-email"]).toBe("alice@example.com");
    expect(seen.headers["x-identity"]).toBe("alice@example.com");
    expect(seen.headers["x-file-saw-email"]).toBe("alice@example.com");
    expect(seen.headers["x-file-saw-session"]).toBe("false");
    expect(seen.headers.cookie ?? "").not.toContain("burrow_session");
    // today's cookie, under today's name
    expect(await session(flagsUrl)).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
  }, 60_000);
});
