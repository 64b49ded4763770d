/**
 * The panel's Traffic policies page in headless Chromium against a real
 * server: in the main navigation; a policy made for every tunnel, listed
 * with what it covers and its document; a document the server refuses
 * comes back with each error's line and column, rule and code (a CEL
 * error with its caret), and choosing an error puts the cursor there; a
 * policy edited (its document shown as written, its scope moved to a user,
 * then to a hostname) and what the API then holds; a name taken said
 * beside the name; a policy deleted after a confirmation. And the reading
 * of the API's refusal, alone.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { offsetOf, policyErrors } from "../../src/admin/panel/web/policy-errors.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { DESKTOP, openBrowser, PHONE, signIn, type TestBrowser } from "./browser.ts";

// page.evaluate() callbacks run in the browser; the root tsconfig has no DOM types
declare const document: any;

let server: TestServer;
let api: AdminClient;
let browser: TestBrowser;
let page: Page;
let bobId = 0;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  bobId = await api.createUser("bob");
  browser = await openBrowser(DESKTOP);
  page = browser.page;
  await signIn(page, server.adminUrl);
}, 60_000);

afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
});

const nav = () => page.getByRole("navigation", { name: "Main" });
const dialog = () => page.getByRole("dialog");
const documentBox = () => dialog().getByLabel("Document (YAML or JSON)");

const GOOD = `on_http_request:
  - name: office only
    actions:
      - type: restrict-ips
        config: { allow: [203.0.113.0/24] }
`;
/** A CEL mistake on line 3 (an undeclared variable), and an action burrow does not have on line 6. */
const BAD = `on_http_request:
  - name: api
    expressions: ["req.method == 'GET' && req.nope"]
    actions: [{ type: deny }]
  - actions:
      - type: owasp-crs-request
`;

const listed = async () => (await api.get("/api/policies")).body as { id: number; name: string; scope: string; user_id: number | null; hostname: string | null; policy: string }[];

describe("the API's refusal, read back", () => {
  test("each error's line, column, rule, code and caret; none for a refusal of another kind", () => {
    const message = `policy: does not load:
policy:3:43: undeclared reference to 'req.nope' (req's variables are req.method, ...) (rule api) [CEL_TYPE]
    req.method == 'GET' && req.nope
                              ^
policy:6:13: 'owasp-crs-request' is ngrok's; not in burrow (rule #2) [ACTION_UNKNOWN]
policy: the document is larger than 1024 bytes [POLICY_TOO_LARGE]`;
    expect(policyErrors(message)).toEqual([
      { line: 3, column: 43, message: "undeclared reference to 'req.nope' (req's variables are req.method, ...)", rule: "api", code: "CEL_TYPE", snippet: "req.method == 'GET' && req.nope\n                          ^" },
      { line: 6, column: 13, message: "'owasp-crs-request' is ngrok's; not in burrow", rule: "#2", code: "ACTION_UNKNOWN" },
      { message: "the document is larger than 1024 bytes", code: "POLICY_TOO_LARGE" },
    ]);
    expect(policyErrors("a policy named 'x' exists already")).toBeUndefined();
  });

  test("a line and column as an offset in the text", () => {
    const text = "ab\ncdef\ng";
    expect(offsetOf(text, 1, 1)).toBe(0);
    expect(offsetOf(text, 2, 3)).toBe(5);
    expect(offsetOf(text, 2, 99)).toBe(7); // the line's end
    expect(offsetOf(text, 9, 1)).toBe(text.length);
  });
});

describe("the Traffic policies page", () => {
  test("is in the navigation, and says when there is none", async () => {
    await nav().getByRole("link", { name: "Policies" }).click();
    await page.getByRole("heading", { name: "Traffic policies", level: 1 }).waitFor();
    expect(new URL(page.url()).pathname).toBe("/policies");
    await page.getByText("No policy yet").waitFor();
  });

  test("makes a policy for every tunnel: listed with what it covers and its document", async () => {
    await page.getByRole("button", { name: "New policy" }).click();
    await dialog().waitFor();
    await dialog().getByRole("button", { name: "Make policy" }).click();
    await dialog().getByText("Name it after what it is for.").waitFor(); // nothing sent without a name
    await dialog().getByLabel("Name").fill("office");
    await documentBox().fill(GOOD);
    await dialog().getByRole("button", { name: "Make policy" }).click();
    await page.getByText("Policy “office” made.").waitFor();
    const item = page.locator('li[data-policy="office"]');
    await item.waitFor();
    expect(await item.textContent()).toContain("Every tunnel");
    await item.getByText("Document").click();
    expect(await item.locator("pre").textContent()).toBe(GOOD);
    expect((await listed()).map((p) => [p.name, p.scope, p.policy])).toEqual([["office", "server", GOOD]]);
  });

  test("a document that does not load: each error with its line, column, rule and code; choosing one puts the cursor there", async () => {
    await page.getByRole("button", { name: "New policy" }).click();
    await dialog().getByLabel("Name").fill("broken");
    await documentBox().fill(BAD);
    await dialog().getByRole("button", { name: "Make policy" }).click();
    const errors = dialog().locator(".policy-errors li");
    await errors.first().waitFor();
    expect(await errors.count()).toBe(2);
    const cel = errors.nth(0);
    expect(await cel.getAttribute("data-code")).toBe("CEL_TYPE");
    expect(await cel.textContent()).toContain("rule api");
    expect(await cel.textContent()).toContain("req.nope");
    expect(await cel.locator("pre").textContent()).toMatch(/req\.nope\n\s*\^/);
    const where = await cel.getByRole("button").textContent();
    const [, line, column] = /Line (\d+), column (\d+)/.exec(where!)!;
    expect(Number(line)).toBe(3);
    await cel.getByRole("button").click();
    const caret = await documentBox().evaluate((el: { selectionStart: number }) => el.selectionStart);
    expect(caret).toBe(offsetOf(BAD, Number(line), Number(column)));
    // the caret is on the undeclared name
    const nope = BAD.indexOf("req.nope");
    expect(caret).toBeGreaterThanOrEqual(nope);
    expect(caret).toBeLessThan(nope + "req.nope".length);
    expect(await errors.nth(1).getAttribute("data-code")).toBe("ACTION_UNKNOWN");
    expect(await errors.nth(1).textContent()).toContain("owasp-crs-request");
    await dialog().getByRole("button", { name: "Cancel" }).click();
    await dialog().waitFor({ state: "detached" });
    expect((await listed()).map((p) => p.name)).toEqual(["office"]);
  });

  test("edits a policy: its document as written, its scope moved to a user's, then a hostname's", async () => {
    await page.getByRole("button", { name: "Edit policy office" }).click();
    expect(await documentBox().inputValue()).toBe(GOOD);
    await dialog().getByLabel("Covers").selectOption("user");
    await dialog().getByLabel("User").selectOption({ label: "bob" });
    const changed = GOOD.replace("203.0.113.0/24", "198.51.100.0/24");
    await documentBox().fill(changed);
    await dialog().getByRole("button", { name: "Save policy" }).click();
    await page.getByText("Policy “office” saved.").waitFor();
    await page.locator('li[data-policy="office"]').getByText("User bob").waitFor();
    expect((await listed())[0]).toMatchObject({ scope: "user", user_id: bobId, hostname: null, policy: changed });

    await page.getByRole("button", { name: "Edit policy office" }).click();
    await dialog().getByLabel("Covers").selectOption("hostname");
    await dialog().getByLabel("Hostname").fill("*.dev.example.com");
    await dialog().getByRole("button", { name: "Save policy" }).click();
    await page.locator('li[data-policy="office"]').getByText("Hostname *.dev.example.com").waitFor();
    expect((await listed())[0]).toMatchObject({ scope: "hostname", user_id: null, hostname: "*.dev.example.com" });
  });

  test("a name another policy has is said beside the name", async () => {
    await page.getByRole("button", { name: "New policy" }).click();
    await dialog().getByLabel("Name").fill("office");
    await documentBox().fill(GOOD);
    await dialog().getByRole("button", { name: "Make policy" }).click();
    await dialog().locator(".field-error", { hasText: "exists already" }).waitFor();
    await dialog().getByRole("button", { name: "Cancel" }).click();
    await dialog().waitFor({ state: "detached" });
  });

  test("at 360 px wide nothing scrolls sideways, its document and the editor included", async () => {
    await page.setViewportSize(PHONE);
    try {
      await page.goto(server.adminUrl + "/policies");
      const item = page.locator('li[data-policy="office"]');
      await item.getByText("Document").click();
      const width = () => page.evaluate(() => document.documentElement.scrollWidth);
      expect(await width()).toBe(PHONE.width);
      await page.getByRole("button", { name: "Edit policy office" }).click();
      await documentBox().waitFor();
      expect(await width()).toBe(PHONE.width);
      await dialog().getByRole("button", { name: "Cancel" }).click();
    } finally {
      await page.setViewportSize(DESKTOP);
    }
  });

  test("deletes a policy after a confirmation", async () => {
    await page.getByRole("button", { name: "Delete policy office" }).click();
    await dialog().getByRole("button", { name: "Delete policy" }).click();
    await page.getByText("Policy “office” deleted.").waitFor();
    await page.getByText("No policy yet").waitFor();
    expect(await listed()).toEqual([]);
    expect(browser.pageErrors).toEqual([]);
  });
});
