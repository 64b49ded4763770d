/**
 * Screenshots of the admin panel for README.md and docs/operations.md: run by hand with
 *   node_modules/.bin/bun test/panel/screenshots.ts [outdir]
 * It starts a real server with realistic data (30 days of traffic, live
 * tunnels from real agents) and writes dashboard-*.png and user-*.png at
 * desktop and phone width into docs/images/ (or outdir).
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { startServer } from "../harness/server.ts";
import { DESKTOP, openBrowser, PHONE, signIn } from "./browser.ts";
import { seedScene } from "./seed.ts";

const outDir = process.argv[2] ?? join(import.meta.dir, "..", "..", "docs", "images");
mkdirSync(outDir, { recursive: true });

await using server = await startServer();
await using scene = await seedScene(server, await signedIn(server));
const alice = scene.users.get("alice")!.id;

// some traffic while the pictures are taken, so the live rates show
const pump = setInterval(() => {
  tunnelFetch(server.edgePort, "alice", "/live", { headers: { "x-burrow-skip-warning": "1" } }).then((r) => r.text(), () => {});
}, 400);

await using browser = await openBrowser(DESKTOP);
const { page } = browser;
await signIn(page, server.adminUrl);

async function shoot(path: string, file: string, viewport: { width: number; height: number }) {
  await page.setViewportSize(viewport);
  await page.goto(server.adminUrl + path);
  await page.locator(".chart canvas").first().waitFor();
  await page.locator("tr[data-tunnel]").first().waitFor();
  await page.locator(".rate").first().waitFor({ timeout: 8000 }).catch(() => {}); // a second live poll shows rates
  await page.mouse.move(0, 0);
  await page.screenshot({ path: join(outDir, file), fullPage: true });
  console.log(`wrote ${join(outDir, file)}`);
}

try {
  await shoot("/", "dashboard-desktop.png", DESKTOP);
  await shoot(`/users/${alice}`, "user-desktop.png", DESKTOP);
  await shoot("/", "dashboard-phone.png", PHONE);
  await shoot(`/users/${alice}`, "user-phone.png", PHONE);
} catch (err) {
  // what the server and agents said, minus the per-request lines
  const said = (text: string) => text.split("\n").filter((l) => !/^\S+\s+(GET|POST)\s/.test(l)).join("\n");
  console.error(said(server.output.text()));
  for (const agent of scene.agents) console.error(said(agent.output.text()));
  throw err;
} finally {
  clearInterval(pump);
}
