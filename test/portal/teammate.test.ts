/**
 * A teammate from an invitation link to a running tunnel, with the admin
 * doing nothing but making the invitation, on the compiled executable (the
 * server, `burrow login` and `burrow http`) and in Chromium: the admin makes
 * the link on the panel's Invitations page; the teammate opens it, chooses a
 * username and password, runs `burrow login`, approves its code on the
 * portal, runs `burrow http`, and sees the tunnel live on the portal.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compiledBurrow } from "../harness/compiled.ts";
import { LineReader } from "../harness/lines.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, signIn, type TestBrowser } from "../panel/browser.ts";

let burrow: string;
let server: TestServer;
let adminBrowser: TestBrowser;
let teammateBrowser: TestBrowser;
let upstream: ReturnType<typeof Bun.serve>;
const home = mkdtempSync(join(tmpdir(), "burrow-teammate-"));
const children: ReturnType<typeof Bun.spawn>[] = [];

beforeAll(async () => {
  burrow = await compiledBurrow();
  server = await startServer({ executable: burrow });
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("the teammate's app") });
  adminBrowser = await openBrowser();
  teammateBrowser = await openBrowser();
}, 120_000);

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  await adminBrowser?.[Symbol.asyncDispose]();
  await teammateBrowser?.[Symbol.asyncDispose]();
  upstream?.stop(true);
  await server?.stop();
  rmSync(home, { recursive: true, force: true });
});

function run(args: string[]) {
  const proc = Bun.spawn([burrow, ...args], { env: { ...process.env, XDG_CONFIG_HOME: home, DISPLAY: "", WAYLAND_DISPLAY: "" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  children.push(proc);
  return { proc, output: new LineReader(proc) };
}

test("invitation link → account → burrow login approved on the portal → burrow http → live on the portal", async () => {
  // the admin: one invitation, made on the panel
  const admin = adminBrowser.page;
  await signIn(admin, server.adminUrl);
  await admin.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Invitations" }).click();
  await admin.getByRole("heading", { level: 1, name: "Invitations", exact: true }).waitFor();
  await admin.getByLabel("Note").fill("for Sam");
  await admin.getByLabel("Devices").fill("2");
  await admin.getByRole("button", { name: "Make invitation" }).click();
  const url = await admin.getByTestId("invitation-url").inputValue();
  expect(url).toMatch(new RegExp(`^http://localhost:${server.edgePort}/invite#bri_`));
  await admin.getByRole("button", { name: "I have copied it" }).click();
  await admin.locator("li[data-invitation]").first().waitFor();
  expect(await admin.locator("li[data-invitation]").first().textContent()).toContain("pending");

  // the teammate: the link, a username and a password
  const page = teammateBrowser.page;
  await page.goto(url);
  await page.getByRole("heading", { name: /You are invited to localhost/ }).waitFor();
  expect(await page.getByTestId("offer").textContent()).toContain("Devices2");
  await page.getByLabel("Choose a username").fill("sam");
  await page.getByLabel("Choose a password").fill("sams-password");
  await page.getByLabel("The password again").fill("sams-password");
  await page.getByRole("button", { name: "Join" }).click();
  await page.getByRole("heading", { level: 1, name: "Devices", exact: true }).waitFor();
  expect(await page.getByTestId("current-user").textContent()).toContain("sam");
  expect(new URL(page.url()).hash).toBe("");

  // burrow login, approved in the teammate's browser
  const login = run(["login", "--server", `http://localhost:${server.edgePort}`, "--device-name", "sams-laptop", "--no-browser"]);
  const line = await login.output.waitFor(/\(or open (\S+)\)/, 15_000);
  await page.goto(/\(or open (\S+)\)/.exec(line)![1]!);
  await page.getByTestId("pending-device").waitFor();
  await page.getByRole("button", { name: "Approve" }).click();
  await page.getByText("is approved").waitFor();
  expect(await login.proc.exited).toBe(0);
  expect(login.output.text()).toContain("as sam");

  // burrow http with no flags but the port: the saved login
  const agent = run(["http", String(upstream.port), "--subdomain", "sams-app"]);
  await agent.output.waitFor(/Forwarding/, 15_000);
  const res = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `sams-app.localhost:${server.edgePort}` } });
  expect(res.status).toBe(200); // sam's settings skip no warning, but a script (no browser) is not shown it
  expect(await res.text()).toBe("the teammate's app");

  // live on the portal, with its device
  await page.goto(`http://localhost:${server.edgePort}/`);
  await page.getByRole("link", { name: `sams-app.localhost:${server.edgePort}` }).waitFor();
  expect(await page.getByTestId("my-tunnels").textContent()).toContain("sams-laptop");

  // and the invitation is used, by sam
  await admin.reload();
  await admin.locator("li[data-invitation]").first().waitFor();
  expect(await admin.locator("li[data-invitation]").first().textContent()).toContain("used by sam");
  expect([...adminBrowser.pageErrors, ...teammateBrowser.pageErrors]).toEqual([]);
}, 120_000);
