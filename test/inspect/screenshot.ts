/**
 * The picture of the inspector in docs/inspector.md: run by hand with
 *   node_modules/.bin/bun test/inspect/screenshot.ts [outdir]
 * It starts a real server, agent and local service, sends a few requests
 * of different kinds (one replayed), and writes inspector.png (1200x800)
 * into docs/images/ (or outdir) with a JSON request open.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { openBrowser } from "../panel/browser.ts";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startRig, startUpstream } from "./rig.ts";

const outDir = process.argv[2] ?? join(import.meta.dir, "..", "..", "docs", "images");
mkdirSync(outDir, { recursive: true });

await using rig = await startRig();
using up = startUpstream();
await using a = await startInspectedAgent(rig, up.port);
const send = async (path: string, init?: RequestInit) => void (await (await a.visit(path, init)).arrayBuffer());
await send("/");
await send("/image");
await send("/gzip", { headers: { "accept-encoding": "gzip" } });
await send("/binary");
await send("/missing?page=2");
await send("/echo", { method: "PUT", body: "name=Ada&lang=en", headers: { "content-type": "application/x-www-form-urlencoded" } });
await send("/json?user=42", { method: "POST", body: JSON.stringify({ name: "Ada", roles: ["admin", "dev"], active: true }), headers: { "content-type": "application/json", authorization: "Bearer example-token" } });
const list = async () => ((await (await a.api("/api/requests")).json()) as { requests: { id: number; path: string; state: string }[] }).requests;
await waitUntil(async () => (await list()).every((r) => r.state !== "pending") && (await list()).length === 7, 5_000, "the captures");
const json = (await list()).find((r) => r.path === "/json?user=42")!;
await a.api(`/api/requests/${json.id}/replay`, { method: "POST" });

await using browser = await openBrowser({ width: 1200, height: 800 });
const { page } = browser;
await page.goto(a.inspector + "/");
await page.locator(".live.on").waitFor();
await page.locator(".request-row", { hasText: "/json?user=42" }).last().click();
await page.locator(".json-view").first().waitFor();
await page.screenshot({ path: join(outDir, "inspector.png") });
if (browser.pageErrors.length) throw new Error(`page errors: ${browser.pageErrors.join("; ")}`);
console.log(`wrote ${join(outDir, "inspector.png")}`);
