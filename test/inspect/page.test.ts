/**
 * The inspector's page as served: one bundled document whose script and
 * stylesheet come from the inspector itself, behind the same Host check,
 * from source and from the compiled executable alone in an empty
 * directory; and its browser code type-checks.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startAgent } from "../harness/agent.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { startRig, startUpstream, type Rig, type Upstream } from "./rig.ts";

const root = join(import.meta.dir, "..", "..");
let rig: Rig;
let up: Upstream;
beforeAll(async () => {
  rig = await startRig();
  up = startUpstream();
});
afterAll(async () => {
  up?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
});

/** The page and every script and stylesheet it links. */
async function fetchPage(base: string) {
  const res = await fetch(base + "/");
  const html = await res.text();
  const links = [...html.matchAll(/<(?:script|link)\b[^>]*\b(?:src|href)="([^"]+)"/g)].map((m) => m[1]!).filter((l) => !l.startsWith("data:"));
  const assets = await Promise.all(
    links.map(async (l) => {
      const r = await fetch(new URL(l, base));
      return { url: l, status: r.status, type: (r.headers.get("content-type") ?? "").split(";")[0], csp: r.headers.get("content-security-policy"), size: (await r.arrayBuffer()).byteLength };
    }),
  );
  return { res, html, assets };
}

async function checkPage(inspector: string) {
  const { res, html, assets } = await fetchPage(inspector);
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/html");
  expect(html).toContain("<title>burrow inspector</title>");
  expect(assets.map((x) => [x.status, x.type]).sort()).toEqual([
    [200, "text/css"],
    [200, "text/javascript"],
  ]);
  for (const x of assets) {
    expect(x.url).toStartWith("/");
    expect(x.size).toBeGreaterThan(100);
    expect(x.csp).toContain("default-src 'self'");
  }
  // the assets are behind the Host check too
  const sneaky = await fetch(new URL(assets[0]!.url, inspector), { headers: { host: "evil.example" } });
  expect(sneaky.status).toBe(403);
}

describe("from source", () => {
  test("/ is the inspector page, with its script and stylesheet", async () => {
    await using agent = await startAgent({ kind: "http", target: up.port, server: rig.server.edgeUrl, token: rig.token, args: ["--inspect-addr", "127.0.0.1:0"] });
    const inspector = /Inspector\s+(\S+)/.exec(await agent.output.waitFor(/Inspector\s+\S+/))![1]!;
    await checkPage(inspector);
    expect((await fetch(inspector + "/no-such-page")).status).toBe(404);
  });

  test("the page's browser code type-checks (tsc -p src/agent/inspector/web)", () => {
    const tsc = Bun.spawnSync([join(root, "node_modules", ".bin", "tsc"), "--noEmit", "-p", join(root, "src/agent/inspector/web")], { cwd: root, stdout: "pipe", stderr: "pipe" });
    expect(tsc.stdout.toString() + tsc.stderr.toString()).toBe("");
    expect(tsc.exitCode).toBe(0);
  }, 60_000);
});

describe("from the compiled executable", () => {
  test("burrow http, alone in an empty directory, serves the inspector page and its API", async () => {
    const binary = await compiledBurrow();
    await using agent = await startAgent({ kind: "http", target: up.port, server: rig.server.edgeUrl, token: rig.token, executable: binary, args: ["--inspect-addr", "127.0.0.1:0"] });
    const inspector = /Inspector\s+(\S+)/.exec(await agent.output.waitFor(/Inspector\s+\S+/))![1]!;
    await checkPage(inspector);
    const tunnels = (await (await fetch(inspector + "/api/tunnels")).json()) as any;
    expect(tunnels.tunnels.map((t: any) => t.name)).toEqual(["http"]);
  }, 120_000);
});
