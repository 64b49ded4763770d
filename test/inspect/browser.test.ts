/**
 * The inspector's page in headless Chromium, against a real agent: a
 * request through the tunnel appears live, its JSON body shows pretty and a
 * binary one as hex, and an edited replay reaches the local service and
 * appears linked to its original. Nothing fails on the page, and nothing is
 * fetched from anywhere but the inspector.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startRig, startUpstream, type InspectedAgent, type Rig, type Upstream } from "./rig.ts";

let rig: Rig;
let up: Upstream;
let a: InspectedAgent;
let browser: TestBrowser;

beforeAll(async () => {
  rig = await startRig();
  up = startUpstream();
  a = await startInspectedAgent(rig, up.port);
  browser = await openBrowser();
}, 30_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await a?.[Symbol.asyncDispose]();
  up?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
});

const row = (path: string) => browser.page.locator(".request-row", { hasText: path });

test("the page opens live on the inspector, with the tunnel named", async () => {
  const { page } = browser;
  await page.goto(a.inspector + "/");
  await page.locator(".live.on").waitFor();
  await page.locator(".tunnel", { hasText: a.subdomain }).waitFor();
  await page.getByText("No requests yet").waitFor();
}, 20_000);

test("a request through the tunnel appears in the list by itself, and its JSON body shows pretty", async () => {
  const { page } = browser;
  await (await a.visit("/json?from=browser", { method: "POST", body: '{"compact":{"nested":[1,2]}}', headers: { "content-type": "application/json" } })).text();
  await row("/json?from=browser").waitFor(); // no reload: the live stream brought it
  await row("/json?from=browser").locator(".status", { hasText: "200" }).waitFor();
  await row("/json?from=browser").click();
  const views = page.locator(".json-view");
  await views.first().waitFor();
  // the request's compact JSON, indented; then the response's
  expect(await views.nth(0).textContent()).toBe(JSON.stringify({ compact: { nested: [1, 2] } }, null, 2));
  expect(await views.nth(1).textContent()).toBe(JSON.stringify({ hello: "world", list: [1, 2, 3] }, null, 2));
}, 20_000);

test("a binary body shows as a hex dump", async () => {
  const { page } = browser;
  await (await a.visit("/binary")).arrayBuffer();
  await row("/binary").click();
  const hex = page.locator(".hex-view");
  await hex.waitFor();
  // BINARY is (i * 37) & 0xff: 00 25 4a 6f ...
  expect(await hex.textContent()).toStartWith("00000000  00 25 4a 6f 94 b9 de 03");
}, 20_000);

test("an image body is previewed, and filters narrow the list", async () => {
  const { page } = browser;
  await (await a.visit("/image")).arrayBuffer();
  await row("/image").click();
  await page.locator("img.image-view").waitFor();
  await page.getByLabel("Path contains").fill("binary");
  await waitUntil(async () => (await page.locator(".request-row").count()) === 1, 5_000, "one row left");
  expect(await page.locator(".request-row").first().textContent()).toContain("/binary");
  await page.getByLabel("Path contains").fill("");
  await page.getByLabel("Method").selectOption("POST");
  await waitUntil(async () => (await page.locator(".request-row").count()) === 1, 5_000, "the POST alone");
  await page.getByLabel("Method").selectOption("");
}, 20_000);

test("replay with an edited header reaches the local service and appears linked to its original", async () => {
  const { page } = browser;
  await (await a.visit("/echo?edit=1", { method: "POST", body: "from the visitor", headers: { "content-type": "text/plain" } })).text();
  await row("/echo?edit=1").click();
  await page.locator(".capture h2", { hasText: "/echo?edit=1" }).waitFor();
  const originalId = Number(await row("/echo?edit=1").getAttribute("data-id"));
  await page.getByRole("button", { name: "Edit and replay" }).click();
  const headers = page.locator(".replay-form textarea[name=headers]");
  await headers.fill(`${await headers.inputValue()}\nx-from-browser: edited`);
  await page.locator(".replay-form textarea[name=body]").fill("from the replay");
  const before = up.seen.length;
  await page.getByRole("button", { name: "Send" }).click();
  await waitUntil(() => up.seen.length > before, 5_000, "the replay at the local service");
  const seen = up.seen.at(-1)!;
  expect(seen.headers["x-from-browser"]).toBe("edited");
  expect(new TextDecoder().decode(seen.body)).toBe("from the replay");
  // the new capture is chosen, says what it replays, and carries a badge in the list
  await page.locator(".replay-of", { hasText: `replay of #${originalId}` }).waitFor();
  await page.locator(".request-row", { has: page.locator(".badge", { hasText: "replay" }) }).first().waitFor();
  await page.locator(".replay-of").click();
  await page.locator(".facts", { hasText: `#${originalId}` }).waitFor();
  // copy as curl: the command to the public address, shown (the clipboard may be refused headless)
  await page.getByRole("button", { name: "Copy as curl" }).click();
  const curl = await page.locator("textarea.curl").inputValue();
  expect(curl).toStartWith(`curl -X 'POST' 'http://${a.subdomain}.localhost:${rig.server.edgePort}/echo?edit=1'`);
  expect(curl).toContain("--data-binary 'from the visitor'");
}, 20_000);

test("clear all empties the list; nothing failed on the page and nothing left the inspector's origin", async () => {
  const { page } = browser;
  await page.getByRole("button", { name: "Clear all" }).click();
  await page.getByText("No requests yet").waitFor();
  expect(browser.pageErrors).toEqual([]);
  const elsewhere = browser.requests.filter((r) => !r.url.startsWith(a.inspector + "/") && !r.url.startsWith("data:"));
  expect(elsewhere).toEqual([]);
}, 20_000);
