/**
 * The portal's webhooks page in Chromium (Debian's), against the real
 * server and a real receiver verifying every delivery with the
 * `standardwebhooks` package: a user makes a webhook there (its secret
 * shown once), the events of their own devices arrive signed with it; they
 * change its events, description and state, send a delivery again from
 * its recent deliveries, rotate its secret (the next delivery verifies
 * with either), and delete it. Another user's webhook never shows, and the
 * page fits a phone.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { portalAs, type PortalClient } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { openBrowser, PHONE, type TestBrowser } from "../panel/browser.ts";

// what runs in the page (page.evaluate) sees the browser's globals
declare const document: any;
declare const window: any;

let server: TestServer;
let admin: AdminClient;
let alice: PortalClient;
let browser: TestBrowser;
let page: Page;
let receiver: WebhookReceiver;

const portal = () => `http://localhost:${server.edgePort}`;
const types = () => receiver.received.map((r) => `${r.event.type} ${(r.event.data as { device_name?: string }).device_name ?? ""}`.trim());

beforeAll(async () => {
  server = await startServer({ args: ["--webhook-allow-private", "on", "--webhook-backoff-max", "1", "--webhook-retry-window", "60"] });
  admin = await signedIn(server);
  await admin.createUser("alice", { max_devices: 10 });
  await admin.createUser("bob");
  alice = await portalAs(server.edgePort, "alice");
  receiver = startReceiver();
  browser = await openBrowser();
  page = browser.page;
}, 60_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
  await receiver?.stop();
});

async function signIn(username: string) {
  await browser.context.clearCookies();
  await page.goto(portal() + "/");
  await page.getByLabel("Username").fill(username);
  await page.getByLabel("Password").fill("password-123");
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.getByTestId("current-user").waitFor();
}

test("a user makes a webhook on the portal, gets their own events, changes it, sends a delivery again, rotates its secret and deletes it", async () => {
  // bob's webhook, made with his own API: never on alice's page
  const bob = await portalAs(server.edgePort, "bob");
  const bobs = await bob.post("/_burrow/api/me/webhooks", { url: `${receiver.url}?bob`, events: ["*"] });
  expect(bobs.status).toBe(201);

  await signIn("alice");
  await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Webhooks" }).click();
  await page.getByRole("heading", { level: 1, name: "Webhooks", exact: true }).waitFor();
  await page.getByText("No webhook yet").waitFor();

  // a user may ask only for events about themselves: the server's refusal shows at the field
  await page.getByLabel("URL").fill(receiver.url);
  await page.getByLabel("Events").fill("user.*");
  await page.getByRole("button", { name: "Make webhook" }).click();
  await page.getByText("names no event about your own tunnels, tokens or quota").waitFor();

  await page.getByLabel("Events").fill("token.*, tunnel.*");
  await page.getByLabel("Description").fill("my laptop's hooks");
  await page.getByRole("button", { name: "Make webhook" }).click();
  const secret = await page.getByTestId("webhook-secret").inputValue();
  expect(secret).toMatch(/^whsec_/);
  receiver.secrets.push(secret);
  await page.getByRole("button", { name: "I have stored it" }).click();
  const item = page.locator("[data-webhook]");
  await item.getByText(receiver.url).waitFor();
  expect(await item.count()).toBe(1);
  expect(await item.textContent()).toContain("token.*, tunnel.*");
  expect(await item.textContent()).toContain("my laptop's hooks");
  expect(await page.content()).not.toContain("?bob");

  // alice's own action, through her API: the event arrives, verified with the secret the page showed
  await alice.post("/_burrow/api/me/tokens", { device_name: "build-box" });
  await waitUntil(() => receiver.received.length === 1, 15_000, "token.created");
  expect(types()).toEqual(["token.created build-box"]);
  expect(receiver.rejected).toEqual([]);

  // changed: only token.revoked, another description, turned off
  await page.getByRole("button", { name: `Change the webhook to ${receiver.url}` }).click();
  const dialog = page.getByRole("dialog");
  await dialog.getByLabel("Events", { exact: true }).fill("token.revoked");
  await dialog.getByLabel("Description", { exact: true }).fill("revocations");
  await dialog.getByLabel("On: deliver events to it").uncheck();
  await dialog.getByRole("button", { name: "Save changes" }).click();
  await page.getByText("Webhook changed.").waitFor();
  await item.getByText("revocations").waitFor();
  const changed = (await alice.get("/_burrow/api/me/webhooks")).body;
  expect(changed).toEqual([expect.objectContaining({ events: ["token.revoked"], description: "revocations", enabled: false, url: receiver.url })]);
  // off: a revocation now is not delivered, not even later
  const unheard = (await alice.post("/_burrow/api/me/tokens", { device_name: "unheard" })).body.token_id as number;
  await alice.delete(`/_burrow/api/me/tokens/${unheard}`);
  await page.getByRole("button", { name: "Turn on" }).click();
  await page.getByText("Webhook turned on.").waitFor();
  const tokens = (await alice.get("/_burrow/api/me/tokens")).body as { id: number; device_name: string }[];
  await alice.delete(`/_burrow/api/me/tokens/${tokens.find((t) => t.device_name === "build-box")!.id}`);
  await waitUntil(() => receiver.received.length === 2, 15_000, "token.revoked");
  expect(types()).toEqual(["token.created build-box", "token.revoked build-box"]);

  // recent deliveries, newest first; one sent again keeps its webhook-id
  await page.getByRole("button", { name: "Recent deliveries" }).click();
  const rows = page.locator("[data-delivery]");
  await rows.first().getByText("token.revoked").waitFor();
  await rows.nth(1).getByText("delivered").waitFor();
  expect(await rows.count()).toBe(2);
  const firstId = Number(await rows.nth(1).getAttribute("data-delivery"));
  await page.getByRole("button", { name: `Send delivery #${firstId} again` }).click();
  await page.getByText(`Delivery #${firstId} will be sent again.`).waitFor();
  await waitUntil(() => receiver.received.length === 3, 15_000, "the delivery sent again");
  expect(receiver.received[2]!.id).toBe(receiver.received[0]!.id);

  // rotated: the new secret once, the old one signing beside it
  await page.getByRole("button", { name: "Rotate secret" }).click();
  const rotated = await page.getByTestId("webhook-secret").inputValue();
  expect(rotated).toMatch(/^whsec_/);
  expect(rotated).not.toBe(secret);
  await page.getByText("The old secret signs beside it until").waitFor();
  await page.getByRole("button", { name: "I have stored it" }).click();
  receiver.secrets.push(rotated);
  const more = (await alice.post("/_burrow/api/me/tokens", { device_name: "rotated" })).body.token_id as number;
  await alice.delete(`/_burrow/api/me/tokens/${more}`);
  await waitUntil(() => receiver.received.length === 4, 15_000, "a delivery after the rotation");
  expect(receiver.received[3]!.verifiedBy).toEqual([0, 1]);
  // the page never shows a secret again
  const html = await page.content();
  expect(html).not.toContain(secret);
  expect(html).not.toContain(rotated);

  await page.getByRole("button", { name: `Delete the webhook to ${receiver.url}` }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Delete webhook" }).click();
  await page.getByText("Webhook deleted.").waitFor();
  await page.getByText("No webhook yet").waitFor();
  expect((await alice.get("/_burrow/api/me/webhooks")).body).toEqual([]);
  // bob's is untouched
  expect((await bob.get("/_burrow/api/me/webhooks")).body).toHaveLength(1);
  expect(browser.pageErrors).toEqual([]);
}, 120_000);

test("at a phone's width the webhooks page fits, with nothing to scroll sideways", async () => {
  await alice.post("/_burrow/api/me/webhooks", { url: `${receiver.url}/a-rather-long-path/that-goes-on-and-on?and=a&query=too`, events: ["*"], description: "phone" });
  await using phone = await openBrowser(PHONE);
  await phone.page.goto(portal() + "/");
  await phone.page.getByLabel("Username").fill("alice");
  await phone.page.getByLabel("Password").fill("password-123");
  await phone.page.getByRole("button", { name: "Sign in" }).click();
  await phone.page.getByTestId("current-user").waitFor();
  await phone.page.goto(portal() + "/webhooks");
  const item = phone.page.locator("[data-webhook]", { hasText: "phone" });
  await item.waitFor();
  await item.getByRole("button", { name: "Recent deliveries" }).click();
  await phone.page.getByText("No delivery yet.").waitFor();
  const widths = await phone.page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, view: window.innerWidth }));
  expect(widths.scroll).toBe(widths.view);
  expect(phone.pageErrors).toEqual([]);
}, 60_000);
