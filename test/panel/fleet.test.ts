/**
 * Many agents in Chromium, against the real server and real agents: the
 * panel's token list edits a device's tunnels kept on the server (a mistake
 * shown in the server's words, naming the field, and kept in the dialog),
 * the portal's devices page does the same for a user's own device, and the
 * panel's Agents page lists the connected agents with their tunnels and
 * asks one to connect again: a yes is said, a no (its flag off) stays in
 * the dialog in the agent's words.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { DESKTOP, openBrowser, signIn, type TestBrowser } from "./browser.ts";

let server: TestServer;
let api: AdminClient;
let browser: TestBrowser;
let page: Page;
let carolId = 0;
const agents: TestAgent[] = [];
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("carol's") });

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  carolId = await api.createUser("carol");
  browser = await openBrowser(DESKTOP);
  page = browser.page;
}, 60_000);

afterAll(async () => {
  for (const a of agents) await a.stop();
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
  web.stop(true);
});

describe("a device's tunnels on the server", () => {
  test("the panel's token list: a mistake is shown with its field and kept; a good one is saved with its version", async () => {
    const made = (await api.post(`/api/users/${carolId}/tokens`, { device_name: "router" })).body;
    await signIn(page, server.adminUrl);
    await page.goto(`${server.adminUrl}/users/${carolId}`);
    await page.getByRole("button", { name: "Tunnels of router" }).click();
    const dialog = page.getByRole("dialog", { name: "Tunnels of “router”" });
    const box = dialog.getByTestId("tunnels-config");
    await box.waitFor();
    expect(await box.inputValue()).toBe("{}");
    await box.fill("{ not json");
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.getByText("This is not JSON").waitFor();
    await box.fill(JSON.stringify({ web: { proto: "http", addr: web.port, subdomian: "carol" } }));
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.getByText("tunnels.web.subdomian: unknown key").waitFor();
    expect((await api.get(`/api/tokens/${made.token_id}/config`)).body.version).toBe(0);
    await box.fill(JSON.stringify({ web: { proto: "http", addr: web.port, subdomain: "carol-router" } }));
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.waitFor({ state: "detached" });
    await page.getByText("Tunnels of “router” saved (version 1).").waitFor();
    expect((await api.get(`/api/tokens/${made.token_id}/config`)).body.tunnels.web.subdomain).toBe("carol-router");
  });

  test("the portal's devices page: the user edits their own device's tunnels", async () => {
    const made = (await api.post(`/api/users/${carolId}/tokens`, { device_name: "carol-nas" })).body;
    await browser.context.clearCookies();
    await page.goto(`http://localhost:${server.edgePort}/`);
    await page.getByLabel("Username").fill("carol");
    await page.getByLabel("Password").fill("password-123");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByTestId("current-user").waitFor();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Devices" }).click();
    await page.getByRole("button", { name: "Tunnels of carol-nas" }).click();
    const dialog = page.getByRole("dialog", { name: "Tunnels of “carol-nas”" });
    await dialog.getByTestId("tunnels-config").fill(JSON.stringify({ files: { proto: "http", addr: 8080 } }));
    await dialog.getByRole("button", { name: "Save" }).click();
    await dialog.waitFor({ state: "detached" });
    await waitUntil(async () => (await api.get(`/api/tokens/${made.token_id}/config`)).body.version === 1, 10_000, "the config kept");
  });
});

describe("the Agents page", () => {
  test("lists the connected agents with their tunnels; asks one to reconnect (a yes said), and one whose flag is off (its no kept in the dialog)", async () => {
    const willing = (await api.post(`/api/users/${carolId}/tokens`, { device_name: "willing" })).body;
    const unwilling = (await api.post(`/api/users/${carolId}/tokens`, { device_name: "unwilling" })).body;
    agents.push(await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token: willing.token, args: ["--subdomain", "carol-willing", "--no-inspect"] }));
    agents.push(await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token: unwilling.token, args: ["--remote-restart", "off", "--no-inspect"] }));
    await browser.context.clearCookies();
    await signIn(page, server.adminUrl);
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Agents" }).click();
    await page.getByRole("heading", { name: "Agents", level: 1 }).waitFor();
    const row = page.locator(`tr[data-token='${willing.token_id}']`);
    await row.getByText("carol-willing.localhost").waitFor();
    expect(await row.textContent()).toContain("burrow/");

    await row.getByRole("button", { name: `Reconnect the agent of carol, token ${willing.token_id}` }).click();
    const confirm = page.getByRole("dialog", { name: "Ask the agent to connect again?" });
    await confirm.getByRole("button", { name: "Ask to reconnect" }).click();
    await page.getByText("The agent of carol answered: connecting again.").waitFor();

    const other = page.locator(`tr[data-token='${unwilling.token_id}']`);
    await other.getByRole("button", { name: `Reconnect the agent of carol, token ${unwilling.token_id}` }).click();
    await confirm.getByRole("button", { name: "Ask to reconnect" }).click();
    await confirm.getByText("the agent refused: this agent's --remote-restart is off").waitFor();
    await confirm.getByRole("button", { name: "Cancel" }).click();
  });
});
