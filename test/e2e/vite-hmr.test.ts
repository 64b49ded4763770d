/**
 * Vite's hot module reload through an http tunnel, as a developer uses it:
 * the real Vite dev server (under Node.js, with its defaults: `*.localhost`
 * is a host it accepts) behind `burrow http`, and headless Chromium on the
 * tunnel's address. The page's HMR WebSocket goes through the edge (a switch
 * piped only after Vite's 101 answers the browser's key), and an edit on disk
 * reaches the open page without a reload: a marker set on the page survives
 * it. A raw WebSocket client with Vite's subprotocol gets Vite's greeting
 * through the tunnel too, without a browser.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { WebSocket as PageWebSocket } from "playwright-core";
import { chromiumPath } from "../harness/chromium.ts";
import { LineReader } from "../harness/lines.ts";
import { freeRange } from "../harness/ports.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";
import { deferred, waitUntil, within } from "../harness/wait.ts";
import { openBrowser } from "../panel/browser.ts";

const SUB = "vite-app";
const VITE = join(import.meta.dir, "..", "..", "node_modules", "vite", "bin", "vite.js");
const NODE = Bun.which("node");
const CHROMIUM = chromiumPath();
const HAVE_CHROMIUM = CHROMIUM !== undefined && existsSync(CHROMIUM);
const WAIT_MS = 10_000;

// page.evaluate() callbacks run in the browser; the root tsconfig has no DOM types
declare const window: { hmrMarker?: string };
declare const getComputedStyle: (el: unknown) => { color: string };

/** A tiny Vite project: a page whose module writes a line and accepts its own updates, and a style sheet. */
function writeProject(dir: string, version: number, colour: string): void {
  writeFileSync(
    join(dir, "index.html"),
    `<!doctype html><html><head><title>vite through burrow</title></head><body><p id="app"></p><script type="module" src="/main.js"></script></body></html>\n`,
  );
  writeMain(dir, version);
  writeStyle(dir, colour);
}

const writeMain = (dir: string, version: number) =>
  writeFileSync(
    join(dir, "main.js"),
    `import "./style.css";\ndocument.querySelector("#app").textContent = "hello from vite, version ${version}";\nif (import.meta.hot) import.meta.hot.accept();\n`,
  );
const writeStyle = (dir: string, colour: string) => writeFileSync(join(dir, "style.css"), `#app { color: ${colour}; }\n`);

let project: string;
let vite: Subprocess<"ignore", "pipe", "pipe"> | undefined;
let viteOutput: LineReader | undefined;
let tunnel: Tunnel | undefined;
let pageUrl: string;

beforeAll(async () => {
  if (!NODE) return;
  project = mkdtempSync(join(tmpdir(), "burrow-vite-"));
  writeProject(project, 1, "rgb(0, 0, 255)");
  const port = freeRange(1).first;
  vite = Bun.spawn([NODE, VITE, "--host", "127.0.0.1", "--port", String(port), "--strictPort", "--clearScreen", "false"], {
    cwd: project,
    env: { ...process.env, NO_COLOR: "1", BROWSER: "none", CI: "1" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  viteOutput = new LineReader(vite);
  await viteOutput.waitFor(new RegExp(`Local:\\s+http://127\\.0\\.0\\.1:${port}/`), 20_000).catch((err) => {
    throw new Error(`Vite did not come up: ${err.message}\n${viteOutput!.text()}`);
  });
  // the user's warning may be skipped, and the tunnel asks to: the page's first load is the app, as for a developer who set that up
  tunnel = await withTunnel({ username: "frontend-dev", user: { skip_warning: true }, upstream: port, args: ["--subdomain", SUB, "--skip-warning"] });
  pageUrl = `http://${SUB}.localhost:${tunnel.server.edgePort}/`;
}, 60_000);

afterAll(async () => {
  await tunnel?.close();
  if (vite && vite.exitCode === null && vite.signalCode === null) {
    vite.kill("SIGTERM");
    const timer = setTimeout(() => vite!.kill("SIGKILL"), 5_000);
    await vite.exited;
    clearTimeout(timer);
  }
});

describe.skipIf(!NODE)(`Vite's HMR WebSocket through the tunnel${NODE ? "" : " (skipped: no node to run Vite)"}`, () => {
  test("a raw WebSocket client offering vite-hmr gets Vite's 101 with the subprotocol and its {type: connected} greeting", async () => {
    const ws = new WebSocket(`ws://${SUB}.localhost:${tunnel!.server.edgePort}/`, "vite-hmr");
    const greeting = deferred<string>();
    const closed = deferred<number>();
    ws.onmessage = (e) => greeting.resolve(String(e.data));
    ws.onclose = (e) => closed.resolve(e.code);
    try {
      const first = await within(Promise.race([greeting.promise, closed.promise.then((code) => `closed ${code} before a message`)]), WAIT_MS, "Vite's greeting");
      expect(first).toBe(JSON.stringify({ type: "connected" }));
      expect(ws.protocol).toBe("vite-hmr");
    } finally {
      ws.close();
    }
  });
});

describe.skipIf(!NODE || !HAVE_CHROMIUM)(`Vite's dev page in Chromium through the tunnel${!NODE ? " (skipped: no node to run Vite)" : !HAVE_CHROMIUM ? " (skipped: no Chromium)" : ""}`, () => {
  test("the page connects its HMR socket through the tunnel, and edits to a module and a style sheet reach it without a reload", async () => {
    await using browser = await openBrowser();
    const { page } = browser;
    const consoleLines: string[] = [];
    page.on("console", (msg) => void consoleLines.push(msg.text()));
    const sockets: PageWebSocket[] = [];
    const received: string[] = [];
    page.on("websocket", (ws) => {
      sockets.push(ws);
      ws.on("framereceived", (f) => void received.push(String(f.payload)));
    });
    let navigations = 0;
    page.on("framenavigated", (frame) => void (frame === page.mainFrame() && navigations++));

    await page.goto(pageUrl);
    const app = page.locator("#app");
    await app.getByText("hello from vite, version 1").waitFor();
    expect(await app.evaluate((el) => getComputedStyle(el).color)).toBe("rgb(0, 0, 255)");
    await waitUntil(() => consoleLines.includes("[vite] connected."), WAIT_MS, "the page's '[vite] connected.'");
    // Vite's client opened its socket on the page's own host, the tunnel's name on the edge's port, and
    // only there: when that socket fails, it falls back to Vite's own address (127.0.0.1:<port>), which
    // would make HMR look fine on this machine while it is broken through the tunnel
    expect(sockets.map((ws) => new URL(ws.url()).host)).toEqual([`${SUB}.localhost:${tunnel!.server.edgePort}`]);
    expect(received.map((p) => JSON.parse(p).type)).toContain("connected");

    // a marker that a reload would wipe out
    await page.evaluate(() => (window.hmrMarker = "still here"));
    writeMain(project, 2);
    await app.getByText("hello from vite, version 2").waitFor({ timeout: WAIT_MS });
    writeStyle(project, "rgb(255, 0, 0)");
    await waitUntil(async () => (await app.evaluate((el) => getComputedStyle(el).color)) === "rgb(255, 0, 0)", WAIT_MS, "the new colour on the page");

    expect(await page.evaluate(() => window.hmrMarker)).toBe("still here");
    expect(navigations).toBe(1);
    // both updates came over the one socket, as HMR updates
    expect(sockets).toHaveLength(1);
    const updated = received.map((p) => JSON.parse(p)).filter((m) => m.type === "update").flatMap((m) => m.updates.map((u: { path: string }) => u.path));
    expect(updated).toEqual(expect.arrayContaining(["/main.js", "/style.css"]));
    expect(consoleLines.filter((l) => l.startsWith("[vite] hot updated:")).length).toBeGreaterThanOrEqual(2);
    expect(browser.pageErrors).toEqual([]);
  }, 30_000);
});
