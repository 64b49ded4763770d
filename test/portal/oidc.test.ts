/**
 * The portal's company sign-in, in Chromium against a real OpenID provider
 * (oidc-provider from npm): a person of the allowed domain signs in and their
 * user is made with the server's defaults (no password); their next sign-in
 * is the same user; a person of another domain, or not in an allowed group,
 * is refused and nothing is made; with --portal-oidc-invite-only only an
 * invitation opened with company sign-in makes a user, with its settings.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { loopbackOnly, signInAtProvider, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { freeRange } from "../harness/ports.ts";
import { PortalClient } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";

let provider: TestProvider;
let browser: TestBrowser;
/** Domain rule; invite-only; group rule. */
let open: TestServer, inviteOnly: TestServer, grouped: TestServer;
let openAdmin: AdminClient;
const ports = { open: 0, inviteOnly: 0, grouped: 0 };

const serverArgs = (port: number, extra: string[]) => ["--http-port", String(port), "--portal-oidc-issuer", provider.issuer, "--portal-oidc-client-id", TEST_CLIENT_ID, "--oidc-http-issuers", "loopback", ...extra];
const env = { BURROW_PORTAL_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET };

beforeAll(async () => {
  ports.open = freeRange(1).first;
  ports.inviteOnly = freeRange(1).first;
  ports.grouped = freeRange(1).first;
  provider = await startOidcProvider({
    redirectUris: Object.values(ports).map((p) => `http://localhost:${p}/_burrow/oidc/callback`),
    emails: { alice: "Alice.Smith@example.com", mallory: "mallory@evil.test", bob: "bob@example.com", carol: "carol@example.com", dan: "dan@example.com" },
    groups: { alice: ["eng"], bob: ["sales"], carol: ["eng", "ops"] },
  });
  open = await startServer({ args: serverArgs(ports.open, ["--portal-oidc-allow-domains", "example.com", "--portal-default-max-devices", "2", "--portal-default-protocols", "http"]), env });
  inviteOnly = await startServer({ args: serverArgs(ports.inviteOnly, ["--portal-oidc-invite-only", "on"]), env });
  grouped = await startServer({ args: serverArgs(ports.grouped, ["--portal-oidc-allow-groups", "eng"]), env });
  openAdmin = await signedIn(open);
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 60_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await Promise.all([open?.stop(), inviteOnly?.stop(), grouped?.stop()]);
  await provider?.[Symbol.asyncDispose]();
});

/** Company sign-in from the portal's sign-in page, as `login` at the provider; ends on the portal (signed in) or on a refusal page. */
async function companySignIn(port: number, login: string) {
  const { page } = browser;
  await browser.context.clearCookies();
  await page.goto(`http://localhost:${port}/`);
  await page.getByRole("button", { name: "Sign in with your company account" }).click();
  await signInAtProvider(page, provider, login);
  await page.waitForURL((u) => u.host === `localhost:${port}`, { timeout: 10_000 });
  await page.waitForFunction(() => Boolean(document.querySelector("[data-testid='current-user']") || document.querySelector("h1")?.textContent?.includes("Cannot sign in")));
}

// what runs in the page sees the browser's globals
declare const document: any;

describe("company sign-in", () => {
  test("a person of the allowed domain signs in; their user is made from the email, with the defaults and no password", async () => {
    await companySignIn(ports.open, "alice");
    const { page } = browser;
    expect(await page.getByTestId("current-user").textContent()).toContain("alice.smith");
    expect(new URL(page.url()).pathname).toBe("/devices");
    const users = (await openAdmin.get("/api/users")).body;
    const alice = users.find((u: any) => u.username === "alice.smith");
    expect(alice).toMatchObject({ role: "user", max_devices: 2, allowed_protocols: "http", enabled: true });
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Account" }).click();
    await page.getByText("You sign in with your company's account").waitFor();
    // no password signs them in
    expect((await new PortalClient(ports.open).login("alice.smith", "")).status).toBe(401);
    expect((await new PortalClient(ports.open).login("alice.smith", "anything-at-all")).status).toBe(401);
    const audit = (await openAdmin.get("/api/audit?action=portal.login")).body;
    expect(audit.find((e: any) => e.username === "alice.smith" && e.outcome === "ok")).toMatchObject({ outcome: "ok", details: { via: "portal", method: "company sign-in", user_made: true } });
    expect(browser.pageErrors).toEqual([]);
  }, 60_000);

  test("their next sign-in is the same user, found by the provider's subject", async () => {
    await companySignIn(ports.open, "alice");
    expect(await browser.page.getByTestId("current-user").textContent()).toContain("alice.smith");
    const made = (await openAdmin.get("/api/users")).body.filter((u: any) => u.username.startsWith("alice"));
    expect(made).toHaveLength(1);
  }, 60_000);

  test("a person of another domain is refused, and nothing is made", async () => {
    await companySignIn(ports.open, "mallory");
    const { page } = browser;
    expect(await page.locator("h1").textContent()).toContain("Cannot sign in");
    expect(await page.content()).toContain("mallory@evil.test may not sign in here: only addresses at example.com");
    expect((await openAdmin.get("/api/users")).body.map((u: any) => u.username)).not.toContain("mallory");
    const audit = (await openAdmin.get("/api/audit?action=portal.login")).body;
    expect(audit.find((e: any) => e.outcome === "refused" && e.username === "mallory@evil.test")).toBeDefined();
  }, 60_000);

  test("a username taken by someone else gets a number: a different person is never signed in as them", async () => {
    await openAdmin.createUser("dan");
    await companySignIn(ports.open, "dan");
    expect(await browser.page.getByTestId("current-user").textContent()).toContain("dan-2");
  }, 60_000);

  test("with allowed groups, the groups claim decides", async () => {
    await companySignIn(ports.grouped, "bob");
    expect(await browser.page.content()).toContain("bob@example.com may not sign in here: only members of eng");
    await companySignIn(ports.grouped, "carol");
    expect(await browser.page.getByTestId("current-user").textContent()).toContain("carol");
  }, 60_000);
});

describe("--portal-oidc-invite-only", () => {
  test("no invitation: refused; an invitation opened with company sign-in makes the user with its settings", async () => {
    await companySignIn(ports.inviteOnly, "carol");
    expect(await browser.page.content()).toContain("has no account here yet: ask an admin for an invitation");
    const admin = await signedIn(inviteOnly);
    expect((await admin.get("/api/users")).body.map((u: any) => u.username)).toEqual(["admin"]);

    const made = (await admin.post("/api/invitations", { max_tunnels: 7, note: "for carol" })).body;
    const { page } = browser;
    await browser.context.clearCookies();
    await page.goto(made.url);
    await page.getByRole("button", { name: "Join with your company account" }).click();
    await signInAtProvider(page, provider, "carol");
    await page.waitForURL((u) => u.host === `localhost:${ports.inviteOnly}` && u.pathname === "/devices", { timeout: 10_000 });
    await page.getByTestId("current-user").waitFor();
    const carol = (await admin.get("/api/users")).body.find((u: any) => u.username === "carol");
    expect(carol).toMatchObject({ max_tunnels: 7 });
    expect((await admin.get(`/api/invitations/${made.id}`)).body).toMatchObject({ status: "used", used_username: "carol" });
    // and the invitation is not used again by the next person
    await companySignIn(ports.inviteOnly, "carol");
    expect(await browser.page.getByTestId("current-user").textContent()).toContain("carol");
  }, 60_000);
});

describe("the API's side", () => {
  test("sign-in options say what each server offers; a start's target must be a path on the portal", async () => {
    expect((await new PortalClient(ports.open).get("/_burrow/api/sign-in-options")).body).toEqual({ password: true, company: true, invite_only: false });
    expect((await new PortalClient(ports.inviteOnly).get("/_burrow/api/sign-in-options")).body).toEqual({ password: true, company: true, invite_only: true });
    for (const to of ["//evil.test/x", "https://evil.test/", "evil", "/\\evil.test"]) {
      const res = await new PortalClient(ports.open).post("/_burrow/api/oidc/start", { to });
      expect(res.status).toBe(400);
      expect(res.body.error).toContain("to must be a path on this site");
    }
    const ok = await new PortalClient(ports.open).post("/_burrow/api/oidc/start", { to: "/devices" });
    expect(ok.status).toBe(200);
    expect(ok.body.url.startsWith(`${provider.issuer}/`)).toBe(true);
    expect(ok.headers.get("set-cookie")).toContain("Path=/_burrow/oidc/callback");
    // a callback without the flow's cookie: a page that says so, no session
    const stray = await fetch(`http://localhost:${ports.open}/_burrow/oidc/callback?code=x&state=y`, { redirect: "manual" });
    expect(stray.status).toBe(400);
    expect(await stray.text()).toContain("This sign-in has expired");
  });

  test("a server without company sign-in has no such routes", async () => {
    await using plain = await startServer();
    expect((await new PortalClient(plain.edgePort).get("/_burrow/api/sign-in-options")).body).toEqual({ password: true, company: false, invite_only: false });
    expect((await new PortalClient(plain.edgePort).post("/_burrow/api/oidc/start", {})).status).toBe(404);
  });

  test("bad flags: an issuer without its client id or secret, a bad domain list", async () => {
    const { parseServerConfig } = await import("../../src/config/server.ts");
    const base = ["--portal-oidc-issuer", "https://id.example.com"];
    expect(() => parseServerConfig(base, {})).toThrow("--portal-oidc-client-id");
    expect(() => parseServerConfig([...base, "--portal-oidc-client-id", "x"], {})).toThrow("BURROW_PORTAL_OIDC_CLIENT_SECRET");
    expect(() => parseServerConfig(["--portal-oidc-issuer", "http://id.example.com", "--portal-oidc-client-id", "x"], { BURROW_PORTAL_OIDC_CLIENT_SECRET: "s" })).toThrow("--portal-oidc-issuer");
    expect(() => parseServerConfig([...base, "--portal-oidc-client-id", "x", "--portal-oidc-allow-domains", "not a domain"], { BURROW_PORTAL_OIDC_CLIENT_SECRET: "s" })).toThrow("--portal-oidc-allow-domains");
    expect(() => parseServerConfig([...base, "--portal-oidc-client-id", "x", "--portal", "off"], { BURROW_PORTAL_OIDC_CLIENT_SECRET: "s" })).toThrow("--portal on");
    const ok = parseServerConfig([...base, "--portal-oidc-client-id", "x", "--portal-oidc-allow-domains", "@Example.com, example.org"], { BURROW_PORTAL_OIDC_CLIENT_SECRET: "s" });
    expect(ok.help ? undefined : ok.config.portalOidc?.allowDomains).toEqual(["example.com", "example.org"]);
  });
});
