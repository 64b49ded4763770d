/**
 * A documented secret setting that is never read (chisel CVE-2024-43798),
 * the OpenID client secrets: a tunnel's (--oidc-client-secret,
 * BURROW_OIDC_CLIENT_SECRET, burrow.yml's `oidc.client_secret`) and the
 * portal's (BURROW_PORTAL_OIDC_CLIENT_SECRET, never a flag). Each is the
 * one the provider gets when the edge trades a sign-in's code for tokens:
 * with the right secret the visitor gets in, with a wrong one the provider
 * refuses and so does burrow. Without one, the agent or the server refuses
 * to start rather than run a sign-in that cannot work.
 *
 * A real provider (oidc-provider) on loopback, the real server and agents,
 * headless Chromium signing in (secret-settings.test.ts has the others).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { loopbackOnly, signInAtProvider, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { freeRange } from "../harness/ports.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";

const WRONG_SECRET = "not-the-client-secret-0123456789";
const TUNNELS = ["oidc-flag", "oidc-env", "oidc-yml", "oidc-wrong"] as const;

let provider: TestProvider;
let browser: TestBrowser;
let server: TestServer;
let token: string;
const agents: { proc: ReturnType<typeof Bun.spawn>; output: LineReader }[] = [];
const portals = { right: undefined as TestServer | undefined, wrong: undefined as TestServer | undefined };
const portalPorts = { right: 0, wrong: 0 };
const dirs: string[] = [];

const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("the service behind the sign-in") });

/** `burrow <args>` (an agent), with no secret in its environment but what `env` gives. */
function burrow(args: string[], env: Record<string, string> = {}, cwd?: string) {
  const home = mkdtempSync(join(tmpdir(), "burrow-oidc-secret-home-"));
  dirs.push(home);
  const proc = Bun.spawn([...burrowCommand(), ...args], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: home, BURROW_OIDC_CLIENT_SECRET: "", BURROW_TOKEN: "", BURROW_SERVER: "", HTTPS_PROXY: "", ALL_PROXY: "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  return { proc, output: new LineReader(proc) };
}

const oidcFlags = (sub: string) => ["http", String(service.port), "--no-inspect", "--server", server.edgeUrl, "--token", token, "--subdomain", sub, "--oidc-issuer", provider.issuer, "--oidc-client-id", TEST_CLIENT_ID];

function projectYml(sub: string, secretLine: string): string {
  const cwd = mkdtempSync(join(tmpdir(), "burrow-oidc-secret-project-"));
  dirs.push(cwd);
  writeFileSync(
    join(cwd, "burrow.yml"),
    `server: ${server.edgeUrl}\ntoken: ${token}\ntunnels:\n  web:\n    proto: http\n    addr: ${service.port}\n    subdomain: ${sub}\n    oidc:\n      issuer: ${provider.issuer}\n      client_id: ${TEST_CLIENT_ID}\n${secretLine}`,
  );
  return cwd;
}

beforeAll(async () => {
  server = await startServer({ args: ["--oidc-http-issuers", "loopback"] });
  portalPorts.right = freeRange(1).first;
  portalPorts.wrong = freeRange(1).first;
  provider = await startOidcProvider({
    redirectUris: [
      ...TUNNELS.map((sub) => `http://${sub}.localhost:${server.edgePort}/_burrow/oidc/callback`),
      ...Object.values(portalPorts).map((p) => `http://localhost:${p}/_burrow/oidc/callback`),
    ],
    emails: { alice: "alice@example.com" },
  });
  const admin = await signedIn(server);
  token = await admin.createToken(await admin.createUser("oidc-owner", { max_tunnels: 0 }));
  const started = [
    burrow([...oidcFlags("oidc-flag"), "--oidc-client-secret", TEST_CLIENT_SECRET]),
    burrow(oidcFlags("oidc-env"), { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET }),
    burrow(["start", "--all"], {}, projectYml("oidc-yml", `      client_secret: ${TEST_CLIENT_SECRET}\n`)),
    burrow(oidcFlags("oidc-wrong"), { BURROW_OIDC_CLIENT_SECRET: WRONG_SECRET }),
  ];
  agents.push(...started);
  for (const a of started) await a.output.waitFor(/Forwarding\s+(\S+)/, 15_000);
  const portalArgs = (port: number) => ["--http-port", String(port), "--portal-oidc-issuer", provider.issuer, "--portal-oidc-client-id", TEST_CLIENT_ID, "--oidc-http-issuers", "loopback"];
  portals.right = await startServer({ args: portalArgs(portalPorts.right), env: { BURROW_PORTAL_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET } });
  portals.wrong = await startServer({ args: portalArgs(portalPorts.wrong), env: { BURROW_PORTAL_OIDC_CLIENT_SECRET: WRONG_SECRET } });
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 90_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  for (const a of agents) {
    a.proc.kill("SIGINT");
    const timer = setTimeout(() => a.proc.kill("SIGKILL"), 10_000);
    await a.proc.exited;
    clearTimeout(timer);
  }
  await Promise.all([server?.stop(), portals.right?.stop(), portals.wrong?.stop()]);
  await provider?.[Symbol.asyncDispose]();
  service.stop(true);
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** A browser's visit to a tunnel as `alice`, signing in at the provider: what the page says in the end. */
async function visit(sub: string): Promise<string> {
  const { page, context } = browser;
  await context.clearCookies();
  const url = `http://${sub}.localhost:${server.edgePort}/`;
  await page.goto(url);
  await signInAtProvider(page, provider, "alice");
  // back from the provider: the page asked for, or (refused) the callback's answer
  await page.waitForURL((u) => u.host === `${sub}.localhost:${server.edgePort}`, { timeout: 10_000 });
  const onward = page.getByRole("link", { name: "Continue to the site" });
  if (await onward.isVisible().catch(() => false)) await onward.click();
  await page.waitForLoadState();
  return page.locator("body").innerText();
}

describe("a documented secret setting never read: the OpenID client secrets", () => {
  test("a tunnel's client secret from --oidc-client-secret, BURROW_OIDC_CLIENT_SECRET and burrow.yml: each signs a visitor in; a wrong one is refused by the provider and by burrow", async () => {
    for (const sub of ["oidc-flag", "oidc-env", "oidc-yml"]) {
      expect({ sub, page: (await visit(sub)).trim() }).toEqual({ sub, page: "the service behind the sign-in" });
    }
    const before = provider.tokenRequests;
    const refused = await visit("oidc-wrong");
    expect(refused).not.toContain("the service behind the sign-in");
    expect(refused).not.toContain(WRONG_SECRET);
    expect(provider.tokenRequests).toBe(before);
  }, 90_000);

  test("the portal's BURROW_PORTAL_OIDC_CLIENT_SECRET: the right one signs in, a wrong one is refused", async () => {
    const { page, context } = browser;
    const signIn = async (port: number) => {
      await context.clearCookies();
      await page.goto(`http://localhost:${port}/`);
      await page.getByRole("button", { name: "Sign in with your company account" }).click();
      await signInAtProvider(page, provider, "alice");
      await page.waitForURL((u) => u.host === `localhost:${port}`, { timeout: 10_000 });
      await page.waitForFunction(() => Boolean(document.querySelector("[data-testid='current-user']") || document.querySelector("h1")?.textContent?.includes("Cannot sign in")));
      return page.getByTestId("current-user").textContent({ timeout: 1_000 }).catch(() => null);
    };
    expect(await signIn(portalPorts.right)).toContain("alice");
    expect(await signIn(portalPorts.wrong)).toBeNull();
    expect(await page.content()).not.toContain(WRONG_SECRET);
  }, 60_000);

  test("no client secret from any of them: the agent and the server refuse to start, saying which is missing", async () => {
    const noSecret = burrow(oidcFlags("oidc-none"));
    expect(await noSecret.proc.exited).toBe(2);
    await noSecret.output.closed();
    expect(noSecret.output.text()).toContain("--oidc-client-secret");
    const yml = burrow(["start", "--all"], {}, projectYml("oidc-none", ""));
    expect(await yml.proc.exited).toBe(2);
    await yml.output.closed();
    expect(yml.output.text()).toMatch(/client_secret/);
    const portal = burrow(["server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", mkdtempSync(join(tmpdir(), "burrow-oidc-secret-data-")), "--portal-oidc-issuer", provider.issuer, "--portal-oidc-client-id", TEST_CLIENT_ID, "--oidc-http-issuers", "loopback"], { BURROW_PORTAL_OIDC_CLIENT_SECRET: "" });
    expect(await portal.proc.exited).toBe(2);
    await portal.output.closed();
    expect(portal.output.text()).toContain("BURROW_PORTAL_OIDC_CLIENT_SECRET");
  }, 60_000);
});

// what runs in the page sees the browser's globals
declare const document: any;
