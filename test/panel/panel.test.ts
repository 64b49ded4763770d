/**
 * The admin panel in headless Chromium against the real server, a real agent
 * and a real local service. The steps run in order and share one browser,
 * like one admin's session: sign in, create a user, set limits, generate a
 * token, reserve a subdomain, watch the live tunnel, revoke, sign out.
 * Every wait is on DOM state with a bound, never a sleep.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";
import { DESKTOP, openBrowser, PHONE, type TestBrowser } from "./browser.ts";

// page.evaluate() callbacks run in the browser; the root tsconfig has no DOM types
declare const document: any;
declare const window: any;
declare const navigator: any;

const GB = 1024 ** 3;
const RESPONSE = "r".repeat(64 * 1024);

let server: TestServer;
let api: AdminClient;
let browser: TestBrowser;
let page: Page;
let agent: TestAgent | undefined;
let aliceId = 0;
let token = "";
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(RESPONSE) });

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  await api.createUser("bob", { password: "bob-password-1" });
  browser = await openBrowser(DESKTOP);
  page = browser.page;
  await browser.context.grantPermissions(["clipboard-read", "clipboard-write"], { origin: server.adminUrl });
});

afterAll(async () => {
  await agent?.stop();
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
  upstream.stop(true);
});

const alert = () => page.getByRole("alert").first();
const posts = (path: string) => browser.requests.filter((r) => r.method === "POST" && new URL(r.url).pathname === path).length;

describe("sign-in", () => {
  test("checks the form before sending anything", async () => {
    await page.goto(server.adminUrl + "/");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByText("Enter your username").waitFor();
    expect(posts("/api/auth/login")).toBe(0);
  });

  test("says so in words when the password is wrong", async () => {
    await page.getByLabel("Username").fill("admin");
    await page.getByLabel("Password").fill("not-the-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await alert().getByText("invalid username or password").waitFor();
    expect(await alert().textContent()).toContain("Cannot sign in");
  });

  test("says so when the account is not an administrator", async () => {
    await page.getByLabel("Username").fill("bob");
    await page.getByLabel("Password").fill("bob-password-1");
    await page.getByRole("button", { name: "Sign in" }).click();
    await alert().getByText("administrator role required").waitFor();
    expect(await alert().textContent()).toContain("Not an administrator");
  });

  test("says so when sign-in is throttled, with the wait", async () => {
    for (let i = 0; i < 5; i++) await api.call("POST", "/api/auth/login", { username: "ghost", password: "wrong-password" });
    await page.getByLabel("Username").fill("ghost");
    await page.getByLabel("Password").fill("wrong-password");
    await page.getByRole("button", { name: "Sign in" }).click();
    await alert().getByText(/too many failed logins; try again in \d+ s/).waitFor();
    expect(await alert().textContent()).toMatch(/Too many attempts.*you can try again in \d+ s/);
  });

  test("signs in with the keyboard alone, and the header names the current user", async () => {
    await page.goto(server.adminUrl + "/");
    // the username field has focus on arrival
    await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "username");
    await page.keyboard.type("admin");
    await page.keyboard.press("Tab");
    await page.keyboard.type(ADMIN_PASSWORD);
    await page.keyboard.press("Enter");
    await page.getByTestId("current-user").waitFor();
    expect(await page.getByTestId("current-user").textContent()).toContain("admin");
    await page.getByRole("heading", { name: "Dashboard" }).waitFor();
    await page.locator(".chart canvas").waitFor();
  });
});

describe("users", () => {
  test("the new-user form checks before sending and shows the server's field error after", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click();
    await page.getByRole("heading", { name: "Users" }).waitFor();
    await page.getByRole("button", { name: "+ New user" }).click();
    const dialog = page.getByRole("dialog", { name: "New user" });
    await dialog.getByLabel("Username").fill("bob");
    await dialog.getByLabel("Password", { exact: true }).fill("short");
    await dialog.getByRole("button", { name: "Create user" }).click();
    await dialog.getByText("Password must be at least 8 characters").waitFor();
    expect(posts("/api/users")).toBe(0);
    // focus moves on the turn after the error is drawn (user-form.tsx): waited for, not read at once
    await page.waitForFunction(() => document.activeElement?.getAttribute("name") === "password", undefined, { timeout: 10_000 });

    await dialog.getByLabel("Password", { exact: true }).fill("alice-password");
    await dialog.getByRole("button", { name: "Create user" }).click();
    await dialog.getByText("username 'bob' is already taken").waitFor();
    expect(posts("/api/users")).toBe(1);
  });

  test("creates the user and opens their page", async () => {
    const dialog = page.getByRole("dialog", { name: "New user" });
    await dialog.getByLabel("Username").fill("alice");
    await dialog.getByRole("button", { name: "Create user" }).click();
    await page.getByRole("heading", { name: /^alice/ }).waitFor();
    aliceId = Number(/\/users\/(\d+)$/.exec(page.url())?.[1]);
    expect(aliceId).toBeGreaterThan(0);
    expect((await api.get(`/api/users/${aliceId}`)).body.user).toMatchObject({ username: "alice", enabled: true, allowed_protocols: "http,tcp" });
  });

  test("edits every limit and flag, with the traffic limit in a unit", async () => {
    const form = page.locator("#settings-title").locator("xpath=ancestor::section");
    await form.getByLabel("Max tunnels").fill("-1");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByText("Enter a whole number, 0 or more").waitFor();

    await form.getByLabel("Max tunnels").fill("3");
    await form.getByLabel("Max devices").fill("2");
    await form.getByLabel("Traffic limit", { exact: true }).fill("1.5");
    await form.getByLabel("Traffic limit unit").selectOption("GB");
    await form.getByLabel("Per", { exact: true }).selectOption("daily");
    await form.getByLabel("TCP tunnels").uncheck();
    await form.getByLabel("May skip the browser warning page").check();
    await form.getByLabel("May connect through a proxy").uncheck();
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved alice's settings.").waitFor();

    expect((await api.get(`/api/users/${aliceId}`)).body.user).toMatchObject({
      max_tunnels: 3,
      max_devices: 2,
      traffic_limit: 1.5 * GB,
      traffic_period: "daily",
      allowed_protocols: "http",
      skip_warning: true,
      can_use_proxy: false,
      enabled: true,
      role: "user",
    });
    const quota = page.locator("#quota-title").locator("xpath=ancestor::section");
    await quota.getByText("of 1.5 GB").waitFor();
    expect(await quota.getByRole("heading").textContent()).toBe("Traffic today");
    expect(await quota.getByRole("progressbar").getAttribute("aria-valuenow")).toBe("0");
  });

  test("refuses to leave no protocol at all", async () => {
    const form = page.locator("#settings-title").locator("xpath=ancestor::section");
    await form.getByLabel("HTTP tunnels").uncheck();
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByText("Choose at least one protocol").waitFor();
    await form.getByLabel("HTTP tunnels").check();
  });
});

describe("tokens and subdomains", () => {
  test("generates a token: the secret once, a copy button, and the exact login command", async () => {
    await page.getByLabel("Device name").fill("laptop");
    await page.getByRole("button", { name: "Generate token" }).click();
    const dialog = page.getByRole("dialog", { name: "Token for “laptop”" });
    await dialog.waitFor();
    token = await dialog.getByTestId("token-secret").inputValue();
    expect(token).toMatch(/^brw_[0-9A-Za-z]{43}$/);
    expect(await dialog.getByTestId("token-command").inputValue()).toBe(`burrow login --server http://localhost:${server.edgePort} --token ${token}`);
    expect(await dialog.textContent()).toContain("shown only once");

    await dialog.getByRole("button", { name: "Copy the token" }).click();
    await dialog.getByText("Copied to the clipboard").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(token);

    await dialog.getByRole("button", { name: "I have stored it" }).click();
    await dialog.waitFor({ state: "detached" });
    await page.locator("li[data-token='laptop']").getByText("active").waitFor();
    expect(await page.content()).not.toContain(token);
  });

  test("reserves a subdomain for the user, checked before sending", async () => {
    await page.getByLabel("Subdomain", { exact: true }).fill("-bad-");
    await page.getByRole("button", { name: "Reserve" }).click();
    await page.getByText(/Subdomain must be one DNS label/).waitFor();
    expect(posts("/api/domains")).toBe(0);

    await page.getByLabel("Subdomain", { exact: true }).fill("alice-demo");
    await page.getByRole("button", { name: "Reserve" }).click();
    await page.locator("li[data-domain='alice-demo']").getByText("alice-demo.localhost").waitFor();
    expect((await api.get("/api/domains")).body).toEqual([expect.objectContaining({ subdomain: "alice-demo", user_id: aliceId })]);
  });
});

describe("own hostnames", () => {
  test("adds one with its TXT record shown and copied, vouches for another, refuses a bad one with the server's words, deletes with confirmation", async () => {
    const card = page.getByRole("region", { name: "Own hostnames" });
    await card.getByLabel("Hostname").fill("Demo.Alice.test");
    await card.getByRole("button", { name: "Add" }).click();
    const added = page.locator("li[data-hostname='demo.alice.test']");
    await added.getByText("not verified").waitFor();
    const record = (await api.get(`/api/hostnames?user_id=${aliceId}`)).body[0];
    expect(await added.textContent()).toContain(`_burrow-challenge.demo.alice.test = ${record.verification.value}`);
    await added.getByRole("button", { name: "Copy the TXT value of demo.alice.test" }).click();
    await added.getByText("Copied to the clipboard").waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(record.verification.value);
    // no record published: verifying says what was found, and nothing changes
    await added.getByRole("button", { name: "Verify demo.alice.test" }).click();
    await alert().getByText(/_burrow-challenge\.demo\.alice\.test/).waitFor();

    await card.getByLabel("Hostname").fill("vouched.alice.test");
    await card.getByLabel(/Verified/).check();
    await card.getByRole("button", { name: "Add" }).click();
    await page.locator("li[data-hostname='vouched.alice.test']").getByText("verified", { exact: true }).waitFor();

    await card.getByLabel("Hostname").fill("x.localhost");
    await card.getByRole("button", { name: "Add" }).click();
    await card.getByText(/own domain/).waitFor();

    await added.getByRole("button", { name: "Delete demo.alice.test" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await added.waitFor({ state: "detached" });
    expect(((await api.get(`/api/hostnames?user_id=${aliceId}`)).body as { hostname: string }[]).map((h) => h.hostname)).toEqual(["vouched.alice.test"]);
  });
});

describe("live tunnels", () => {
  test("a real agent's tunnel appears with its link, user and device, and its bytes grow without a reload", async () => {
    agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server.edgeUrl, token, args: ["--subdomain", "alice-demo"] });
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Tunnels" }).click();
    await page.evaluate(() => (window.sameDocument = true));

    const row = page.locator("tr[data-tunnel='alice-demo']");
    await row.waitFor();
    expect(await row.getByRole("link", { name: `alice-demo.localhost:${server.edgePort}` }).getAttribute("href")).toBe(
      `http://alice-demo.localhost:${server.edgePort}`,
    );
    expect(await row.locator("td[data-label='User']").textContent()).toBe("alice");
    await row.locator("td[data-label='Device']").getByText("laptop").waitFor();
    expect(await row.locator("td[data-label='Connected']").textContent()).toMatch(/since \d{4}-\d\d-\d\d \d\d:\d\d UTC/);

    const before = Number(await row.locator(".bytes-out").getAttribute("data-bytes"));
    for (let i = 0; i < 4; i++) {
      const res = await tunnelFetch(server.edgePort, "alice-demo", `/file/${i}`, { headers: { "X-Burrow-Skip-Warning": "1" } });
      expect((await res.text()).length).toBe(RESPONSE.length);
    }
    await page.waitForFunction(
      (min) => Number(document.querySelector("tr[data-tunnel='alice-demo'] .bytes-out")?.getAttribute("data-bytes")) >= min,
      before + 4 * RESPONSE.length,
      { timeout: 10_000 },
    );
    expect(Number(await row.locator(".bytes-in").getAttribute("data-bytes"))).toBeGreaterThan(0);
    expect(await row.locator(".bytes-out").textContent()).toMatch(/\d+(\.\d)? (KB|MB)/);
    expect(await page.evaluate(() => window.sameDocument)).toBe(true);
  });

  test("revoking the token, after confirming, closes the tunnel and it vanishes from the list", async () => {
    await page.locator("tr[data-tunnel='alice-demo']").getByRole("link", { name: "alice", exact: true }).click();
    const live = page.locator("#user-live-title").locator("xpath=ancestor::section");
    await live.locator("tr[data-tunnel='alice-demo']").waitFor();

    await page.getByRole("button", { name: "Revoke token laptop" }).click();
    const confirm = page.getByRole("dialog", { name: "Revoke the token “laptop”?" });
    await confirm.getByRole("button", { name: "Cancel" }).click();
    await confirm.waitFor({ state: "detached" });
    expect((await api.get(`/api/users/${aliceId}/tokens`)).body[0].enabled).toBe(true);

    await page.getByRole("button", { name: "Revoke token laptop" }).click();
    await confirm.getByRole("button", { name: "Revoke token" }).click();
    await page.locator("li[data-token='laptop']").getByText("revoked").waitFor();
    await live.locator("tr[data-tunnel='alice-demo']").waitFor({ state: "detached", timeout: 10_000 });
    await live.getByText("alice has no tunnel open right now.").waitFor();
    expect(await Promise.race([agent!.proc.exited, Bun.sleep(10_000).then(() => "still running")])).toBe(1);

    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Tunnels" }).click();
    await page.getByText("No tunnels are open right now.").waitFor();
  });
});

describe("errors, deletion and filters", () => {
  test("a refusal from the server is shown in its words: the last admin cannot be demoted", async () => {
    await page.goto(`${server.adminUrl}/users/1`);
    const form = page.locator("#settings-title").locator("xpath=ancestor::section");
    await form.getByLabel("Role").selectOption("user");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByRole("alert").getByText("cannot demote the last enabled admin").waitFor();
  });

  test("the users table filters by name, status and role", async () => {
    await api.put(`/api/users/${aliceId}`, { enabled: false });
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click();
    const rows = page.locator("tr[data-user]");
    await page.locator("tr[data-user='alice']").waitFor();
    expect(await rows.count()).toBe(3);
    await page.getByLabel("Search by name").fill("BO");
    expect(await rows.allTextContents()).toEqual([expect.stringContaining("bob")]);
    await page.getByLabel("Search by name").fill("");
    await page.getByLabel("Status").selectOption("disabled");
    expect(await rows.count()).toBe(1);
    expect(await rows.first().textContent()).toContain("disabled");
    await page.getByLabel("Status").selectOption("any");
    await page.getByLabel("Role").selectOption("admin");
    expect(await rows.allTextContents()).toEqual([expect.stringContaining("admin")]);
    await page.getByLabel("Role").selectOption("any");
  });

  test("releases a subdomain and deletes a user, each after a confirmation", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Subdomains" }).click();
    await page.getByRole("button", { name: "Release alice-demo" }).click();
    await page.getByRole("dialog", { name: "Release alice-demo?" }).getByRole("button", { name: "Release" }).click();
    await page.getByText("No subdomain is reserved yet.").waitFor();
    expect((await api.get("/api/domains")).body).toEqual([]);

    await page.goto(`${server.adminUrl}/users/${aliceId}`);
    await page.getByRole("button", { name: "Delete alice…" }).click();
    await page.getByRole("dialog", { name: "Delete alice?" }).getByRole("button", { name: "Delete alice" }).click();
    await page.getByRole("heading", { name: "Users" }).waitFor();
    await page.locator("tr[data-user='bob']").waitFor();
    expect(await page.locator("tr[data-user='alice']").count()).toBe(0);
    expect((await api.get(`/api/users/${aliceId}`)).status).toBe(404);
  });

  test("a user page for a user that does not exist says so", async () => {
    await page.goto(`${server.adminUrl}/users/${aliceId}`);
    await alert().getByText("user not found").waitFor();
  });
});

describe("the whole panel", () => {
  test("at 360 px wide nothing scrolls sideways, and every page is reachable", async () => {
    await page.setViewportSize(PHONE);
    for (const path of ["/", "/users", "/users/1", "/tunnels", "/domains"]) {
      await page.goto(server.adminUrl + path);
      await page.locator("main h1").waitFor();
      await page.locator(".loading").first().waitFor({ state: "detached" });
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      expect({ path, width }).toEqual({ path, width: PHONE.width });
    }
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Subdomains" }).waitFor();
    await page.setViewportSize(DESKTOP);
  });

  test("dialogs close with Escape and give focus back", async () => {
    await page.goto(server.adminUrl + "/users");
    const open = page.getByRole("button", { name: "+ New user" });
    await open.focus();
    await page.keyboard.press("Enter");
    await page.getByRole("dialog", { name: "New user" }).waitFor();
    await page.keyboard.press("Escape");
    await page.getByRole("dialog").waitFor({ state: "detached" });
    // the dialog leaves the DOM a moment before its cleanup hands focus back: wait for that, bounded
    await page.waitForFunction(() => document.activeElement?.textContent === "+ New user", undefined, { timeout: 5_000 });
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("+ New user");
  });

  test("when the session ends elsewhere, the panel says so at its next refresh and signs in again in place", async () => {
    await page.goto(server.adminUrl + "/tunnels");
    await page.getByText("No tunnels are open right now.").waitFor();
    const session = (await browser.context.cookies(server.adminUrl)).find((c) => c.name === "tunnel_admin_session");
    expect(session?.httpOnly).toBe(true);
    expect(session?.sameSite).toBe("Lax");
    const ended = await fetch(server.adminUrl + "/api/auth/logout", { method: "POST", headers: { Cookie: `tunnel_admin_session=${session!.value}` } });
    expect(ended.status).toBe(200);
    await page.getByRole("status").getByText(/Your session has ended \(.+\)\. Sign in again to continue\./).waitFor();
    await page.getByLabel("Username").fill("admin");
    await page.getByLabel("Password").fill(ADMIN_PASSWORD);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("heading", { name: "Live tunnels" }).waitFor();
  });

  test("signs out: back to the sign-in page, and the session is gone", async () => {
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByText("You are signed out.").waitFor();
    await page.getByRole("button", { name: "Sign in" }).waitFor();
    expect(await page.evaluate(() => fetch("/api/auth/me").then((r) => r.status))).toBe(401);
  });

  test("asked for nothing from anywhere but the admin server, and threw no errors", async () => {
    const elsewhere = browser.requests.filter((r) => !r.url.startsWith(server.adminUrl + "/") && !r.url.startsWith("data:"));
    expect(elsewhere).toEqual([]);
    expect(browser.requests.length).toBeGreaterThan(20);
    expect(browser.pageErrors).toEqual([]);
  });
});

describe("framing", () => {
  test("inside another site's frame the panel shows nothing but a refusal", async () => {
    const framer = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => new Response(`<!doctype html><iframe src="${server.adminUrl}/" width="800" height="400"></iframe>`, { headers: { "Content-Type": "text/html" } }),
    });
    try {
      await page.goto(`http://127.0.0.1:${framer.port}/`);
      const frame = page.frameLocator("iframe");
      await frame.getByText("does not work inside a frame").waitFor();
      expect(await frame.getByRole("button").count()).toBe(0);
    } finally {
      framer.stop(true);
    }
  });
});
