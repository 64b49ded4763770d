/**
 * OpenID Connect sign-in in front of a tunnel, end to end: a real provider
 * (oidc-provider, the certified Node implementation) on loopback with a test
 * client, a real server and agent (`burrow http --oidc-issuer ...`), and
 * headless Chromium signing in through the tunnel. The local service sees
 * the email; a wrong domain is refused; a tampered cookie is worth nothing;
 * scripts get 401, not a redirect.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { loopbackOnly, signInAtProvider as signInAt, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";

const SUB = "sso-app";
let server: TestServer;
let provider: TestProvider;
let agent: TestAgent;
let browser: TestBrowser;
let tunnelUrl: string;

const service = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => Response.json({ path: new URL(req.url).pathname + new URL(req.url).search, headers: Object.fromEntries(req.headers) }),
});

beforeAll(async () => {
  // the test provider is plain http on loopback, which a server allows only when told to
  server = await startServer({ args: ["--oidc-http-issuers", "loopback"] });
  tunnelUrl = `http://${SUB}.localhost:${server.edgePort}`;
  provider = await startOidcProvider({
    redirectUris: [`${tunnelUrl}/_burrow/oidc/callback`],
    emails: { alice: "alice@example.com", mallory: "mallory@evil.example.org" },
  });
  const api = await signedIn(server);
  const token = await api.createToken(await api.createUser("sso-owner"));
  agent = await startAgent({
    kind: "http",
    target: `127.0.0.1:${service.port}`,
    server: server.edgeUrl,
    token,
    args: ["--subdomain", SUB, "--log", "text", "--no-inspect", "--oidc-issuer", provider.issuer, "--oidc-client-id", TEST_CLIENT_ID, "--oidc-allow-email", "@example.com"],
    // the secret from the environment, as the help suggests (not on the command line)
    env: { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET },
  });
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await agent?.stop();
  await provider?.[Symbol.asyncDispose]();
  await server?.stop();
  service.stop(true);
});

/** Signs in at the provider as `login` (and takes docs/access.md's screenshot of its page when asked to). */
function signInAtProvider(login: string): Promise<void> {
  const { page } = browser;
  return signInAt(page, provider, login, async () => {
    if (process.env.BURROW_ACCESS_SCREENSHOT) await page.screenshot({ path: join(import.meta.dir, "..", "..", "docs", "images", "access-oidc-sign-in.png"), clip: { x: 0, y: 0, width: 1280, height: 360 } });
  });
}

describe("a browser signs in through the tunnel", () => {
  test("sent to the provider (PKCE, state, nonce), back with a session cookie, then the warning, then the service with the email", async () => {
    const { page, context } = browser;
    const first = await tunnelFetch(server.edgePort, SUB, "/reports?year=2026", { headers: { accept: "text/html", "user-agent": "Mozilla/5.0" } });
    expect(first.status).toBe(302);
    const authorize = new URL(first.headers.get("location")!);
    expect(authorize.origin).toBe(provider.issuer);
    expect(authorize.searchParams.get("code_challenge_method")).toBe("S256");
    expect(authorize.searchParams.get("state")).toBeTruthy();
    expect(authorize.searchParams.get("nonce")).toBeTruthy();
    expect(authorize.searchParams.get("redirect_uri")).toBe(`${tunnelUrl}/_burrow/oidc/callback`);

    await page.goto(`${tunnelUrl}/reports?year=2026`);
    await signInAtProvider("alice");
    // signed in: the browser warning comes next (authentication first), then the page asked for
    await page.getByRole("link", { name: "Continue to the site" }).click();
    await page.waitForURL(`${tunnelUrl}/reports?year=2026`);
    const seen = JSON.parse((await page.locator("body").innerText()).trim());
    expect(seen.path).toBe("/reports?year=2026");
    expect(seen.headers["x-burrow-user-email"]).toBe("alice@example.com");
    // the edge's session cookie is its own: the service never gets it
    expect(seen.headers.cookie ?? "").not.toContain("burrow_session");

    const session = (await context.cookies(tunnelUrl)).find((c) => c.name === "burrow_session");
    expect(session).toMatchObject({ httpOnly: true, sameSite: "Lax", path: "/" });
    expect(provider.tokenRequests).toBe(1);
  }, 30_000);

  test("the session cookie lets a script in; the email header a visitor sends is replaced", async () => {
    const session = (await browser.context.cookies(tunnelUrl)).find((c) => c.name === "burrow_session")!;
    const res = await tunnelFetch(server.edgePort, SUB, "/api", { headers: { cookie: `burrow_session=${session.value}`, "x-burrow-user-email": "ceo@example.com" } });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { headers: Record<string, string> }).headers["x-burrow-user-email"]).toBe("alice@example.com");
  });

  test("a tampered cookie is refused: 401 for a script, a new sign-in for a browser", async () => {
    const session = (await browser.context.cookies(tunnelUrl)).find((c) => c.name === "burrow_session")!;
    const [header, payload, signature] = session.value.split(".");
    // the same signature over a payload that claims another address
    const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), email: "boss@example.com" })).toString("base64url");
    const flipped = signature!.slice(0, -2) + (signature!.endsWith("AA") ? "BB" : "AA");
    for (const value of [`${header}.${forgedPayload}.${signature}`, `${header}.${payload}.${flipped}`, "garbage"]) {
      const script = await tunnelFetch(server.edgePort, SUB, "/api", { headers: { cookie: `burrow_session=${value}` } });
      expect(script.status).toBe(401);
      expect(script.headers.get("www-authenticate")).toMatch(/^Burrow-OIDC realm=/);
      const page = await tunnelFetch(server.edgePort, SUB, "/", { headers: { cookie: `burrow_session=${value}`, accept: "text/html" } });
      expect(page.status).toBe(302);
      expect(page.headers.get("location")!.startsWith(provider.issuer)).toBe(true);
    }
  });

  test("no session: scripts and WebSocket upgrades get 401, never a redirect", async () => {
    expect((await tunnelFetch(server.edgePort, SUB, "/api", { headers: { accept: "application/json" } })).status).toBe(401);
    const upgrade = await tunnelFetch(server.edgePort, SUB, "/ws", {
      headers: { accept: "text/html", upgrade: "websocket", connection: "Upgrade", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", "sec-websocket-version": "13" },
    });
    expect(upgrade.status).toBe(401);
  });

  test("a callback without the sign-in's own cookie (a forged or replayed state) is refused", async () => {
    const res = await tunnelFetch(server.edgePort, SUB, "/_burrow/oidc/callback?code=abc&state=forged", { headers: { accept: "text/html" } });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain("expired");
  });
});

describe("the allowed emails", () => {
  test("an account whose email is not in the allowed domain is refused after signing in, and gets no session", async () => {
    const { page, context } = browser;
    await context.clearCookies();
    await page.goto(`${tunnelUrl}/`);
    await signInAtProvider("mallory");
    await page.getByText("mallory@evil.example.org may not reach this tunnel").waitFor();
    expect((await context.cookies(tunnelUrl)).find((c) => c.name === "burrow_session")).toBeUndefined();
  }, 30_000);
});

describe("a plain-http issuer on a server that does not allow them (the default)", () => {
  test("the tunnel is refused with OIDC_INVALID, and the server never asks the issuer", async () => {
    await using strict = await startServer();
    const api = await signedIn(strict);
    const token = await api.createToken(await api.createUser("sso-strict"));
    // a stand-in for a loopback service a token holder would have the server fetch
    let asked = 0;
    const inside = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (asked++, new Response("{}")) });
    try {
      // spawned, not spawnSync: this process's stand-in must stay able to answer, were it asked
      const run = Bun.spawn(
        [...burrowCommand(), "http", String(service.port), "--server", strict.edgeUrl, "--token", token, "--log", "text", "--no-inspect",
          "--oidc-issuer", `http://127.0.0.1:${inside.port}`, "--oidc-client-id", "x", "--oidc-allow-email", "@example.com"],
        { env: { ...process.env, BURROW_OIDC_CLIENT_SECRET: "secret", XDG_CONFIG_HOME: join(import.meta.dir, ".no-such-dir") }, stdout: "pipe", stderr: "pipe", timeout: 20_000 },
      );
      const [code, stderr] = await Promise.all([run.exited, new Response(run.stderr).text()]);
      expect(code).toBe(1);
      expect(stderr).toContain("OIDC_INVALID");
      expect(stderr).toContain("--oidc-http-issuers loopback");
      expect(asked).toBe(0);
    } finally {
      inside.stop(true);
    }
  }, 30_000);
});
