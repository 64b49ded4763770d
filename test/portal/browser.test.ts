/**
 * The portal in Chromium (Debian's), against the real server and agent: a
 * user signs in, sees their own tunnel and traffic, adds a device and uses
 * its token, revokes a device (its tunnel closes), approves a real `burrow
 * login` through the page, at a phone's width too. And the attack the
 * portal's cookie is built against: a tunnel's page planting a session
 * cookie for the parent domain and posting to the portal from the page.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { portalAs } from "../harness/portal.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { openBrowser, PHONE, type TestBrowser } from "../panel/browser.ts";

// what runs in the page (page.evaluate, waitForFunction) sees the browser's globals
declare const document: any;
declare const window: any;

let server: TestServer;
let admin: AdminClient;
let browser: TestBrowser;
let upstream: ReturnType<typeof Bun.serve>;
const cleanup: string[] = [];

/** The portal as a person types it: the server's domain (localhost here) and port. */
const portal = () => `http://localhost:${server.edgePort}`;

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  await admin.createUser("alice", { max_devices: 5, traffic_limit: 10 * 1024 ** 3 });
  await admin.createUser("bob");
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("hello from alice's laptop") });
  browser = await openBrowser();
});

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  upstream?.stop(true);
  await server?.stop();
  for (const d of cleanup) rmSync(d, { recursive: true, force: true });
});

async function signIn(username: string, password = "password-123") {
  const { page } = browser;
  await browser.context.clearCookies();
  await page.goto(portal() + "/");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill(password);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("current-user").waitFor();
}

async function signOut() {
  const { page } = browser;
  if (await page.getByRole("button", { name: "Sign out" }).isVisible().catch(() => false)) {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: /Sign in to/ }).waitFor();
  }
}

describe("a user on their portal", () => {
  test("signs in, sees their own live tunnel with its device and their traffic against the quota; not another user's", async () => {
    const aliceToken = (await (await portalAs(server.edgePort, "alice")).post("/_burrow/api/me/tokens", { device_name: "alice-laptop" })).body.token;
    const bobToken = await admin.createToken((await admin.get("/api/users")).body.find((u: any) => u.username === "bob").id, "bob-box");
    await using _mine = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: aliceToken, args: ["--subdomain", "alice-demo"] });
    await using _bobs = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: bobToken, args: ["--subdomain", "bob-secret"] });
    const { page } = browser;
    await signIn("alice");
    expect(await page.getByTestId("current-user").textContent()).toContain("alice");
    const table = page.getByTestId("my-tunnels");
    await table.waitFor();
    await page.getByRole("link", { name: `alice-demo.localhost:${server.edgePort}` }).waitFor();
    expect(await table.textContent()).toContain("alice-laptop");
    expect(await page.content()).not.toContain("bob-secret");
    await page.getByText("Traffic, last 30 days").waitFor();
    expect(await page.getByRole("region", { name: "Quota" }).textContent()).toContain("10 GB");
    await signOut();
    expect(browser.pageErrors).toEqual([]);
  }, 60_000);

  test("adds a device (the login line once), whose token works; revokes a device, and its tunnel closes", async () => {
    const { page } = browser;
    await signIn("alice");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Devices" }).click();
    await page.getByRole("heading", { level: 1, name: "Devices", exact: true }).waitFor();
    expect(await page.getByRole("textbox", { name: "The login command", exact: true }).inputValue()).toBe(`burrow login --server ${portal()}`);
    await page.getByLabel("Device name").fill("build-box");
    await page.getByRole("button", { name: "Make a token" }).click();
    const command = await page.getByTestId("token-command").inputValue();
    expect(command).toMatch(new RegExp(`^burrow login --server ${portal()} --token brw_[A-Za-z0-9]+$`));
    const token = command.split(" ").pop()!;
    await page.getByRole("button", { name: "I have stored it" }).click();
    await page.locator("[data-token='build-box']").waitFor();

    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "build-box-app"] });
    const through = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `build-box-app.localhost:${server.edgePort}` } });
    expect(await through.text()).toBe("hello from alice's laptop");

    await page.getByRole("button", { name: "Revoke build-box" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke" }).click();
    await page.getByText("“build-box” revoked; its tunnels are closed.").waitFor();
    await waitUntil(() => agent.output.text().includes("TOKEN_DISABLED"), 10_000, "the agent told its token was revoked");
    expect((await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `build-box-app.localhost:${server.edgePort}` } })).status).not.toBe(200);
    await signOut();
    expect(browser.pageErrors).toEqual([]);
  }, 60_000);

  test("a real `burrow login`: its address opened signed out asks to sign in, then shows the device, and approving logs it in", async () => {
    const home = mkdtempSync(join(tmpdir(), "burrow-login-home-"));
    cleanup.push(home);
    const cli = Bun.spawn([...burrowCommand(process.env.BURROW_TEST_EXECUTABLE), "login", "--server", portal(), "--device-name", "new-laptop", "--no-browser"], {
      env: { ...process.env, XDG_CONFIG_HOME: home, DISPLAY: "", WAYLAND_DISPLAY: "" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      const output = new LineReader(cli);
      const line = await output.waitFor(/\(or open (\S+)\)/, 15_000);
      const address = /\(or open (\S+)\)/.exec(line)![1]!;
      const { page } = browser;
      await browser.context.clearCookies();
      await page.goto(address);
      await page.getByText("Sign in to approve the device that is logging in.").waitFor();
      await page.getByLabel("Username").fill("alice");
      await page.getByLabel("Password").fill("password-123");
      await page.getByRole("button", { name: "Sign in" }).click();
      const pending = page.getByTestId("pending-device");
      await pending.waitFor();
      expect(await pending.textContent()).toContain("new-laptop");
      await page.getByRole("button", { name: "Approve" }).click();
      await page.getByText("is approved").waitFor();
      expect(new URL(page.url()).search).toBe(""); // the used code is out of the address bar
      expect(await cli.exited).toBe(0);
      expect(output.text()).toContain("as alice");
      expect(JSON.parse(readFileSync(join(home, "burrow", "config.json"), "utf8")).token).toMatch(/^brw_/);
      await signOut();
    } finally {
      cli.kill("SIGKILL");
    }
    expect(browser.pageErrors).toEqual([]);
  }, 60_000);

  test("at a phone's width every page fits, with nothing to scroll sideways", async () => {
    await using phone = await openBrowser(PHONE);
    const { page } = phone;
    await page.goto(portal() + "/");
    await page.getByLabel("Username").fill("alice");
    await page.getByLabel("Password").fill("password-123");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("current-user").waitFor();
    for (const path of ["/", "/devices", "/account", "/device"]) {
      await page.goto(portal() + path);
      await page.locator("main h1").waitFor();
      const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, view: window.innerWidth }));
      expect({ path, ...widths }).toEqual({ path, scroll: widths.view, view: widths.view });
    }
    expect(phone.pageErrors).toEqual([]);
  }, 60_000);
});

describe("an invitation in the browser", () => {
  test("made with the admin API, opened: what it offers, a username and password, signed in; opened again: it cannot be used", async () => {
    const made = (await admin.post("/api/invitations", { max_tunnels: 2, traffic_limit: 1024 ** 3, note: "welcome, Robin" })).body;
    const { page } = browser;
    await browser.context.clearCookies();
    await page.goto(made.url);
    await page.getByText("“welcome, Robin”").waitFor();
    const offer = await page.getByTestId("offer").textContent();
    expect(offer).toContain("Tunnels at once2");
    expect(offer).toContain("1 GB");
    await page.getByLabel("Choose a username").fill("robin");
    await page.getByLabel("Choose a password").fill("robins-password");
    await page.getByLabel("The password again").fill("something else");
    await page.getByRole("button", { name: "Join" }).click();
    await page.getByText("The two do not match").waitFor();
    await page.getByLabel("The password again").fill("robins-password");
    await page.getByRole("button", { name: "Join" }).click();
    await page.getByRole("heading", { level: 1, name: "Devices", exact: true }).waitFor();
    expect(await page.getByTestId("current-user").textContent()).toContain("robin");
    await signOut();
    await page.goto(made.url);
    await page.getByText("This invitation cannot be used").waitFor();
    expect(await page.content()).toContain("not valid");
    expect(browser.pageErrors).toEqual([]);
  }, 60_000);
});

describe("a tunnel's page against the portal", () => {
  test("planting a session cookie for the parent domain and posting from the page change nothing: the victim is never signed in as the attacker", async () => {
    const attacker = await portalAs(server.edgePort, "bob");
    const attackerKey = attacker.cookie!.split("=")[1]!;
    // bob's tunnel serves a page that plants his session for the whole domain and posts to the portal
    const evil = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req) => {
        if (new URL(req.url).pathname === "/go.js") {
          return new Response(
            `document.cookie = "burrow_portal=${attackerKey}; domain=localhost; path=/";
             fetch("${portal()}/_burrow/api/me/tokens", { method: "POST", credentials: "include", mode: "no-cors", headers: { "content-type": "text/plain" }, body: JSON.stringify({ device_name: "planted-by-bob" }) })
               .then(() => (document.title = "posted"), () => (document.title = "posted"));`,
            { headers: { "content-type": "text/javascript" } },
          );
        }
        return new Response(`<!doctype html><title>evil</title><script src="/go.js"></script>`, { headers: { "content-type": "text/html" } });
      },
    });
    try {
      const bobToken = await admin.createToken((await admin.get("/api/users")).body.find((u: any) => u.username === "bob").id, "bob-evil");
      await using _agent = await startAgent({ kind: "http", target: evil.port!, server: server.edgeUrl, token: bobToken, args: ["--subdomain", "evil"] });
      const { page } = browser;
      await signIn("alice");
      await page.goto(`http://evil.localhost:${server.edgePort}/`);
      // the tunnel's warning page first (it is another user's tunnel): through it to the page itself
      const visit = page.getByRole("link", { name: /Visit Site|Continue/i });
      if (await visit.isVisible().catch(() => false)) await visit.click();
      await page.waitForFunction(() => document.title === "posted", undefined, { timeout: 10_000 });
      // nothing was made with alice's session, nor with bob's planted one
      const tokens = (await admin.get("/api/users")).body;
      for (const u of tokens) {
        const list = (await admin.get(`/api/users/${u.id}/tokens`)).body;
        expect(list.map((t: any) => t.device_name)).not.toContain("planted-by-bob");
      }
      // back on the portal: alice, or signed out (two cookies), never bob
      await page.goto(portal() + "/");
      await page.waitForFunction(() => document.querySelector("[data-testid='current-user']") || document.querySelector("h1#signin-title"));
      const who = await page.getByTestId("current-user").textContent().catch(() => null);
      expect(who === null || who.includes("alice")).toBe(true);
      expect(who ?? "").not.toContain("bob");
      await browser.context.clearCookies();
    } finally {
      evil.stop(true);
    }
  }, 60_000);
});
