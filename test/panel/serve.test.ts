/**
 * How the panel is served: one bundled page on every panel path, its assets
 * from the admin server itself, and the same from the compiled executable
 * alone in an empty directory.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compiledBurrow } from "../harness/compiled.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, signIn } from "./browser.ts";


/** The page at `path` and every script and stylesheet it links, fetched from the admin server. */
async function fetchPanel(adminUrl: string, path = "/") {
  const res = await fetch(adminUrl + path);
  const html = await res.text();
  const assets = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((a) => !a.startsWith("data:"));
  const bodies = await Promise.all(
    assets.map(async (a) => {
      const r = await fetch(new URL(a, adminUrl));
      return { url: a, status: r.status, type: r.headers.get("content-type") ?? "", text: await r.text() };
    }),
  );
  return { res, html, assets: bodies };
}

describe("from source", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server?.stop());

  test("/ is the panel: an HTML page whose script and stylesheet come from the admin server", async () => {
    const { res, html, assets } = await fetchPanel(server.adminUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/html");
    expect(html).toContain("<title>burrow admin</title>");
    expect(assets.map((a) => [a.status, a.type.split(";")[0]]).sort()).toEqual([
      [200, "text/css"],
      [200, "text/javascript"],
    ]);
    for (const a of assets) expect(a.url).toStartWith("/");
    const css = assets.find((a) => a.type.startsWith("text/css"))!.text;
    expect(css).not.toMatch(/@import\s+url\(\s*["']?https?:|url\(\s*["']?https?:\/\//);
    expect(css).toContain(".uplot"); // the chart library's stylesheet is bundled in
  });

  test("every panel path serves the same page, so a reload or a bookmark lands where it was", async () => {
    const home = await (await fetch(server.adminUrl + "/")).text();
    for (const path of ["/users", "/users/42", "/domains", "/tunnels"]) {
      const res = await fetch(server.adminUrl + path);
      expect({ path, status: res.status }).toEqual({ path, status: 200 });
      expect(await res.text()).toBe(home);
    }
  });

  test("the API keeps answering JSON: unknown /api paths are still 404 with an error body", async () => {
    const res = await fetch(server.adminUrl + "/api/nope");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: expect.any(String) });
  });
});

describe("from the compiled executable", () => {
  let workDir: string;
  let binary: string;
  beforeAll(async () => {
    workDir = mkdtempSync(join(tmpdir(), "burrow-panel-binary-"));
    binary = await compiledBurrow(join(workDir, "run"));
  }, 120_000);
  afterAll(() => rmSync(workDir, { recursive: true, force: true }));

  test("alone in an empty directory, it serves the panel, and a browser can sign in to it", async () => {
    await using server = await startServer({ executable: binary, dataDir: join(workDir, "run", "data") });
    const { res, assets } = await fetchPanel(server.adminUrl, "/users");
    expect(res.status).toBe(200);
    expect(assets.length).toBe(2);
    for (const a of assets) expect(a.status).toBe(200);

    await using browser = await openBrowser();
    await signIn(browser.page, server.adminUrl);
    await browser.page.locator(".chart canvas").waitFor();
    expect(browser.pageErrors).toEqual([]);
  }, 30_000);
});
