/**
 * The panel's webhooks page in headless Chromium against the real server
 * and a real receiver: a webhook made there shows its secret once, the
 * events of the admin's next changes arrive verified by `standardwebhooks`,
 * and the webhook's recent deliveries show in the page, a failed one with
 * its error and a way to send it again. At a laptop's width the top bar's
 * links scroll, not the page.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";
import { DESKTOP, openBrowser, type TestBrowser } from "./browser.ts";

// what runs in the page (page.evaluate) sees the browser's globals
declare const document: any;
declare const window: any;

let server: TestServer;
let api: AdminClient;
let browser: TestBrowser;
let page: Page;
let receiver: WebhookReceiver;

beforeAll(async () => {
  server = await startServer({ args: ["--webhook-allow-private", "on", "--webhook-backoff-max", "1", "--webhook-retry-window", "60"] });
  api = await signedIn(server);
  receiver = startReceiver();
  browser = await openBrowser(DESKTOP);
  page = browser.page;
});
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
  await receiver?.stop();
});

test("a webhook made in the panel shows its secret once, gets the admin's events, and lists its deliveries", async () => {
  await page.goto(server.adminUrl + "/webhooks");
  await page.getByLabel("Username").fill("admin");
  await page.getByLabel("Password").fill(ADMIN_PASSWORD);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByRole("heading", { level: 1, name: "Webhooks", exact: true }).waitFor();
  await page.getByLabel("URL").fill(receiver.url);
  await page.getByLabel("Events").fill("user.*");
  await page.getByRole("button", { name: "Make webhook" }).click();
  const secret = await page.getByTestId("webhook-secret").inputValue();
  expect(secret).toMatch(/^whsec_/);
  receiver.secrets.push(secret);
  await page.getByRole("button", { name: "I have stored it" }).click();
  await page.locator("[data-webhook]").getByText(receiver.url).waitFor();

  await api.createUser("seen-by-hook");
  await waitUntil(() => receiver.received.length === 1, 15_000, "the delivery");
  expect(receiver.received[0]!.event.type).toBe("user.created");

  receiver.mode = "error";
  await api.createUser("refused-by-hook");
  await page.getByRole("button", { name: "Recent deliveries" }).click();
  const rows = page.locator("[data-delivery]");
  await rows.first().getByText("answered 503").waitFor({ timeout: 15_000 });
  expect(await rows.count()).toBe(2);
  expect(await rows.nth(1).textContent()).toContain("delivered");
  // the page never shows the secret again
  expect(await page.content()).not.toContain(secret);
});

test("at a laptop's width the top bar's links scroll, not the page, and the Webhooks link is in sight", async () => {
  await using narrow = await openBrowser({ width: 1024, height: 700 });
  await narrow.page.goto(server.adminUrl + "/webhooks");
  await narrow.page.getByLabel("Username").fill("admin");
  await narrow.page.getByLabel("Password").fill(ADMIN_PASSWORD);
  await narrow.page.getByRole("button", { name: "Sign in" }).click();
  await narrow.page.getByRole("heading", { level: 1, name: "Webhooks", exact: true }).waitFor();
  const seen = await narrow.page.evaluate(() => {
    const link = document.querySelector('nav[aria-label="Main"] a[aria-current="page"]')!.getBoundingClientRect();
    const signOut = [...document.querySelectorAll("button")].find((b: any) => b.textContent === "Sign out")!.getBoundingClientRect();
    return { scroll: document.documentElement.scrollWidth, view: window.innerWidth, link: [link.left, link.right], signOut: signOut.right };
  });
  expect(seen.scroll).toBe(seen.view);
  expect(seen.link[0]).toBeGreaterThanOrEqual(0);
  expect(seen.link[1]).toBeLessThanOrEqual(seen.view);
  expect(seen.signOut).toBeLessThanOrEqual(seen.view);
  expect(narrow.pageErrors).toEqual([]);
});
