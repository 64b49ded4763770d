/**
 * The package's examples, run as their users would, from a temp project with
 * the packed burrow-agent installed: the webhook receiver (a handler, no
 * local port) under Node.js, and a Playwright Test run (@playwright/test
 * with Debian's chromium) whose global setup gives the app under test a
 * public URL with forward() and whose page loads it.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { cpSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSdk } from "../../build/sdk.ts";
import { signedIn } from "../harness/admin.ts";
import { chromiumPath } from "../harness/chromium.ts";
import { LineReader } from "../harness/lines.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const ROOT = join(import.meta.dir, "..", "..");

/** The environment without what marks a test runner's worker. */
function withoutTestRunner(env: Record<string, string | undefined>): Record<string, string | undefined> {
  const { JEST_WORKER_ID: _jest, BUN_TEST_WORKER_ID: _bun, ...rest } = env;
  return rest;
}
let server: TestServer;
let project: string;
let env: Record<string, string | undefined>;
const node = Bun.which("node");

beforeAll(async () => {
  const { tarball } = await buildSdk();
  project = mkdtempSync(join(tmpdir(), "burrow-sdk-examples-"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "sdk-examples", private: true, type: "module" }));
  // the package as packed; Playwright Test from this repository's own install (no download)
  const installed = Bun.spawnSync(["npm", "install", "--no-audit", "--no-fund", "--silent", tarball, join(ROOT, "node_modules", "@playwright", "test")], { cwd: project, stdout: "pipe", stderr: "pipe" });
  if (installed.exitCode !== 0) throw new Error(`npm install failed: ${installed.stderr.toString()}`);
  cpSync(join(ROOT, "sdk", "examples"), project, { recursive: true });
  server = await startServer();
  const admin = await signedIn(server);
  const token = await admin.createToken(await admin.createUser("examples", { skip_warning: true }), "examples");
  env = { ...process.env, BURROW_SERVER: server.edgeUrl, BURROW_TOKEN: token, XDG_CONFIG_HOME: join(project, "no-config") };
}, 120_000);

afterAll(async () => {
  await server?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

test.skipIf(!node)("the webhook receiver prints each POST and answers it, and stops on Ctrl-C", async () => {
  const proc = Bun.spawn([node!, "webhook-receiver.mjs"], { cwd: project, env: { ...env, WEBHOOK_SUBDOMAIN: "hooks" }, stdout: "pipe", stderr: "pipe" });
  const out = new LineReader(proc);
  try {
    const line = await out.waitFor(/receiving webhooks at (\S+)/, 20_000);
    expect(line).toContain(`http://hooks.localhost:${server.edgePort}`);
    const body = JSON.stringify({ event: "payment.succeeded", id: 42 });
    const res = await rawHttp(server.edgePort, `POST /stripe HTTP/1.1\r\nHost: hooks.localhost:${server.edgePort}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
    expect(res.status).toBe(200);
    expect(JSON.parse(res.body)).toEqual({ received: true });
    const printed = JSON.parse(await out.waitFor(/"path":"\/stripe"/, 5_000));
    expect(printed).toMatchObject({ path: "/stripe", type: "application/json", body });
    proc.kill("SIGINT");
    expect(await proc.exited).toBe(0);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
  }
}, 60_000);

test.skipIf(!node)("a Playwright Test run: global setup opens the tunnel with forward(), the page loads the public URL", async () => {
  const chromium = chromiumPath();
  expect(chromium).toBeDefined();
  const proc = Bun.spawn([node!, join("node_modules", "@playwright", "test", "cli.js"), "test", "-c", join("playwright", "playwright.config.mjs")], {
    cwd: project,
    // bun test's workers set JEST_WORKER_ID, and Playwright Test refuses to run inside what it takes for Jest
    env: { ...withoutTestRunner(env), CHROMIUM: chromium, PLAYWRIGHT_BROWSERS_PATH: join(project, "no-browsers"), CI: "1" },
    stdout: "pipe",
    stderr: "pipe",
  });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 90_000);
  const [stdout, stderr] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  clearTimeout(timer);
  expect({ code: await proc.exited, out: stdout + stderr }).toMatchObject({ code: 0 });
  expect(stdout).toContain("1 passed");
}, 120_000);
