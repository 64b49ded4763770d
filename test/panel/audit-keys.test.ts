/**
 * The panel's Audit and API keys pages in headless Chromium against a real
 * server: both in the main navigation; the audit log shows what was done
 * (by whom, from where, the outcome and the changed fields) and its user and
 * action filters and "Older entries" work; a key is made with its secret
 * shown once, works for a script, is listed without its secret, and is
 * revoked after a confirmation, after which the script gets 401.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { AUDIT_ACTIONS } from "../../src/core/audit.ts";
import { ACTION_WORDS, detailsLine } from "../../src/admin/panel/web/audit.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { DESKTOP, openBrowser, signIn, type TestBrowser } from "./browser.ts";

// page.waitForFunction() callbacks run in the browser; the root tsconfig has no DOM types
declare const document: any;

let server: TestServer;
let api: AdminClient;
let browser: TestBrowser;
let page: Page;
let bobId = 0;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  bobId = await api.createUser("bob", { max_tunnels: 1 });
  await api.put(`/api/users/${bobId}`, { max_tunnels: 4 });
  // more than a page (100) of entries, so that "Older entries" has something to load
  for (let i = 0; i < 110; i++) await api.put(`/api/users/${bobId}`, { max_devices: i });
  browser = await openBrowser(DESKTOP);
  page = browser.page;
  await signIn(page, server.adminUrl);
}, 60_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
});

const nav = () => page.getByRole("navigation", { name: "Main" });
const rows = () => page.locator("table.audit tbody tr");

test("the panel's words name every action the server records, and say what changed", () => {
  expect(Object.keys(ACTION_WORDS).sort()).toEqual([...AUDIT_ACTIONS].sort());
  expect(detailsLine({ details: { changes: { max_tunnels: { from: 1, to: 4 } }, password_changed: true } })).toBe("max_tunnels 1 → 4, password changed");
  expect(detailsLine({ details: null })).toBe("");
});

describe("the audit page", () => {
  test("is in the navigation and lists entries newest first, with who, from where, what and the outcome", async () => {
    await nav().getByRole("link", { name: "Audit" }).click();
    await page.getByRole("heading", { name: "Audit log", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/audit");
    await rows().first().waitFor();
    expect(await rows().count()).toBe(100);
    // the newest is this browser's sign-in, then the last change to bob
    expect(await rows().first().getAttribute("data-action")).toBe("auth.login");
    const first = rows().nth(1);
    expect(await first.getAttribute("data-action")).toBe("user.update");
    expect(await first.textContent()).toContain("admin");
    expect(await first.textContent()).toContain("127.0.0.1");
    expect(await first.textContent()).toContain("max_devices 108 → 109");
    expect(await first.textContent()).toContain(`user:${bobId}`);
    expect(browser.pageErrors).toEqual([]);
  });

  test("loads older entries on demand, down to the sign-ins", async () => {
    await page.getByRole("button", { name: "Older entries" }).click();
    await page.locator('table.audit tr[data-action="user.create"]').waitFor();
    expect(await rows().count()).toBeGreaterThan(100);
    expect(await page.locator('table.audit tr[data-action="auth.login"]').count()).toBeGreaterThanOrEqual(2);
    await page.getByRole("button", { name: "Older entries" }).waitFor({ state: "detached" });
  });

  test("filters by action and by user", async () => {
    await page.getByLabel("Action").selectOption("user.create");
    await page.waitForFunction(() => {
      const trs = [...document.querySelectorAll("table.audit tbody tr")];
      return trs.length > 0 && trs.every((tr: any) => tr.dataset.action === "user.create");
    });
    expect(await rows().count()).toBe(1);
    expect(await rows().first().textContent()).toContain("User created");
    await page.getByLabel("Action").selectOption("");
    await page.getByLabel("User").selectOption({ label: "bob" });
    await page.getByText("No entry matches these filters.").waitFor(); // bob did nothing himself
    await page.getByLabel("User").selectOption({ label: "admin" });
    await rows().first().waitFor();
    expect(await rows().count()).toBe(100);
    await page.getByLabel("User").selectOption("");
  });

  test("a slow answer for an earlier filter does not overwrite the newer one's", async () => {
    await rows().first().waitFor();
    // hold back answers for the unfiltered log, so that the one for bob lands first
    let held = 0;
    await page.route(/\/api\/audit\?/, async (route) => {
      if (!new URL(route.request().url()).searchParams.has("user_id")) {
        held++;
        await Bun.sleep(600);
      }
      await route.continue();
    });
    try {
      await page.getByLabel("Action").selectOption("user.create");
      await page.getByLabel("Action").selectOption("");
      await page.getByLabel("User").selectOption({ label: "bob" });
      await page.getByText("No entry matches these filters.").waitFor();
      await Bun.sleep(1000); // the held answers arrive now, and must be dropped
      expect(held).toBeGreaterThanOrEqual(1);
      expect(await rows().count()).toBe(0);
      expect(await page.getByText("No entry matches these filters.").count()).toBe(1);
    } finally {
      await page.unroute(/\/api\/audit\?/);
    }
    await page.getByLabel("User").selectOption("");
    await rows().first().waitFor();
  });
});

describe("the API keys page", () => {
  let secret = "";

  test("makes a key and shows its secret once, with an example that uses it", async () => {
    await nav().getByRole("link", { name: "API keys" }).click();
    await page.getByRole("heading", { name: "API keys", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/keys");
    await page.getByText("No API key yet.").waitFor();
    await page.getByRole("button", { name: "Make key" }).click();
    await page.getByText("Name it after the script").waitFor(); // nothing sent without a name
    await page.getByLabel("Name").fill("nightly-backup");
    await page.getByLabel("Expires").selectOption("30");
    await page.getByRole("button", { name: "Make key" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor();
    secret = await page.getByTestId("key-secret").inputValue();
    expect(secret).toMatch(/^brk_[0-9A-Za-z]{43}$/);
    expect(await dialog.locator("textarea").inputValue()).toContain(`Authorization: Bearer ${secret}`);
    await page.getByRole("button", { name: "I have stored it" }).click();
    await dialog.waitFor({ state: "detached" });
    // listed without its secret, and it works for a script
    const item = page.locator('li[data-key="nightly-backup"]');
    await item.waitFor();
    expect(await item.textContent()).toContain("active");
    expect(await item.textContent()).toContain("expires");
    expect(await page.content()).not.toContain(secret);
    const res = await fetch(server.adminUrl + "/api/auth/me", { headers: { Authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(200);
  });

  test("revokes a key after a confirmation; a script with it gets 401", async () => {
    await page.getByRole("button", { name: "Revoke key nightly-backup" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
    await page.getByText("Key “nightly-backup” revoked.").waitFor();
    const item = page.locator('li[data-key="nightly-backup"]');
    await item.getByText("revoked", { exact: true }).waitFor();
    expect(await page.getByRole("button", { name: "Revoke key nightly-backup" }).count()).toBe(0);
    const res = await fetch(server.adminUrl + "/api/auth/me", { headers: { Authorization: `Bearer ${secret}` } });
    expect(res.status).toBe(401);
  });

  test("the audit page shows the key's making and revoking", async () => {
    await nav().getByRole("link", { name: "Audit" }).click();
    await page.locator('table.audit tr[data-action="key.revoke"]').first().waitFor();
    expect(await page.locator('table.audit tr[data-action="key.create"]').first().textContent()).toContain("nightly-backup");
    expect(browser.pageErrors).toEqual([]);
  });
});
