/**
 * `policy` in the SDK: a tunnel opened with burrow-agent's forward({ policy })
 * (the packed package, installed in a temp project and run under Node.js)
 * has its policy run by the edge, given as an object or as YAML text; one
 * the edge cannot load makes forward() reject with POLICY_INVALID and the
 * action's name.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSdk } from "../../build/sdk.ts";
import { signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const node = Bun.which("node");
let project = "";
let server: TestServer | undefined;
let token = "";
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`service saw ${req.method} ${new URL(req.url).pathname}`) });

beforeAll(async () => {
  if (!node) return;
  const { tarball } = await buildSdk();
  project = mkdtempSync(join(tmpdir(), "burrow-sdk-policy-"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "sdk-policy", private: true, type: "module" }));
  const installed = Bun.spawnSync(["npm", "install", "--no-audit", "--no-fund", "--silent", tarball], { cwd: project, stdout: "pipe", stderr: "pipe" });
  if (installed.exitCode !== 0) throw new Error(`npm install failed: ${installed.stderr.toString()}`);
  copyFileSync(join(import.meta.dir, "sdk-policy.mjs"), join(project, "sdk-policy.mjs"));
  server = await startServer();
  const admin = await signedIn(server);
  token = await admin.createToken(await admin.createUser("sdk-policy-user"), "sdk");
}, 120_000);

afterAll(async () => {
  upstream.stop(true);
  await server?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

test.skipIf(!node)("forward({ policy }): an object and YAML text are run by the edge; one that does not load rejects with POLICY_INVALID", async () => {
  const proc = Bun.spawn([node!, "sdk-policy.mjs"], {
    cwd: project,
    env: { ...process.env, XDG_CONFIG_HOME: join(project, "no-config"), SCENARIO: JSON.stringify({ server: server!.edgeUrl, token, edgePort: server!.edgePort, httpPort: upstream.port }) },
    stdout: "pipe",
    stderr: "pipe",
    timeout: 60_000,
  });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  const line = out.trim().split("\n").pop() ?? "";
  let r: Record<string, any>;
  try {
    r = JSON.parse(line);
  } catch {
    throw new Error(`no result: ${out}\n${err}`);
  }
  expect(r.error).toBeUndefined();
  expect(r.objectDelete).toMatchObject({ status: 405 });
  expect(r.objectGet).toEqual({ status: 200, body: "service saw GET /x", tag: "object" });
  expect(r.textTeapot).toMatchObject({ status: 418, body: "short and stout" });
  expect(r.textOther).toMatchObject({ status: 200, body: "service saw GET /other" });
  expect(r.bad.code).toBe("POLICY_INVALID");
  expect(r.bad.message).toContain("forward-internal");
}, 90_000);
