/**
 * A burrow-agent tunnel over its life, under Node.js from the packed
 * package: the server restarts (the tunnel says "reconnecting", then
 * "online" with the same name, and carries requests again), then its token
 * is revoked ("closed" with the server's code, TOKEN_DISABLED).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSdk } from "../../build/sdk.ts";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { restartablePort } from "../harness/ports.ts";

const node = Bun.which("node");
let project: string;
let dataDir: string;
let edgePort: number;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`up ${new URL(req.url).pathname}`) });

const serve = () => startServer({ dataDir, args: ["--http-port", String(edgePort)] });

beforeAll(async () => {
  const { tarball } = await buildSdk();
  project = mkdtempSync(join(tmpdir(), "burrow-sdk-life-"));
  dataDir = mkdtempSync(join(tmpdir(), "burrow-sdk-life-data-"));
  edgePort = restartablePort();
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "sdk-life", private: true, type: "module" }));
  const installed = Bun.spawnSync(["npm", "install", "--no-audit", "--no-fund", "--silent", tarball], { cwd: project, stdout: "pipe", stderr: "pipe" });
  if (installed.exitCode !== 0) throw new Error(`npm install failed: ${installed.stderr.toString()}`);
  copyFileSync(join(import.meta.dir, "events.mjs"), join(project, "events.mjs"));
}, 120_000);

afterAll(() => {
  upstream.stop(true);
  for (const dir of [project, dataDir]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test.skipIf(!node)("a server restart: reconnecting, then online with the same name; a revoked token: closed with TOKEN_DISABLED", async () => {
  let server: TestServer | undefined = await serve();
  const admin = await signedIn(server);
  const userId = await admin.createUser("lifelong");
  const token = await admin.createToken(userId, "sdk");
  const proc = Bun.spawn([node!, "events.mjs"], {
    cwd: project,
    env: { ...process.env, XDG_CONFIG_HOME: join(project, "no-config"), SCENARIO: JSON.stringify({ server: server.edgeUrl, token, port: upstream.port, subdomain: "lifelong" }) },
    stdout: "pipe",
    stderr: "pipe",
  });
  const out = new LineReader(proc);
  try {
    await out.waitFor(/"event":"live"/, 20_000);
    await server.stop();
    server = undefined;
    await out.waitFor(/"event":"reconnecting"/, 15_000);
    server = await serve();
    const online = JSON.parse(await out.waitFor(/"event":"online"/, 30_000));
    expect(online.url).toBe(`http://lifelong.localhost:${edgePort}`);
    const res = await tunnelFetch(edgePort, "lifelong", "/again");
    expect(await res.text()).toContain("up /again");
    const api = await signedIn(server);
    const tokenId = (await api.get(`/api/users/${userId}/tokens`)).body[0].id;
    expect((await api.delete(`/api/tokens/${tokenId}`)).status).toBe(200);
    const closed = JSON.parse(await out.waitFor(/"event":"closed"/, 15_000));
    expect(closed).toMatchObject({ event: "closed", code: "TOKEN_DISABLED" });
    expect(await proc.exited).toBe(0);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
    await server?.stop();
  }
}, 120_000);
