/**
 * `burrow server health`, the container image's HEALTHCHECK: exit 0 when
 * the running server's /readyz says ready; 1, with one line saying why,
 * when it says not ready (a real server whose database stopped taking
 * writes), when nothing answers, or when the answer takes too long; 2 for
 * a mistake on the command line. It finds the admin port as the server
 * does (--admin-port, BURROW_ADMIN_PORT) and never asks through a proxy.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let port: string;

beforeAll(async () => {
  server = await startServer();
  port = new URL(server.adminUrl).port;
});
afterAll(async () => {
  await server?.stop();
});

/** The environment without BURROW_* variables (the test runner's own must not point the check elsewhere). */
function cleanEnv(extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("BURROW_")) env[k] = v;
  return { ...env, ...extra };
}

async function health(args: string[], env: Record<string, string> = cleanEnv()): Promise<{ code: number | null; stdout: string; stderr: string; ms: number }> {
  const started = performance.now();
  const proc = Bun.spawn([...burrowCommand(), "server", "health", ...args], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr, ms: performance.now() - started };
}

describe("a ready server", () => {
  test("--admin-port: exit 0, and the URL it asked", async () => {
    const r = await health(["--admin-port", port]);
    expect(r).toMatchObject({ code: 0, stdout: `ready (http://127.0.0.1:${port}/readyz)\n`, stderr: "" });
  });

  test("BURROW_ADMIN_PORT, the server's own variable; BURROW_ADMIN_HOST 0.0.0.0 is asked on loopback", async () => {
    expect((await health([], cleanEnv({ BURROW_ADMIN_PORT: port }))).code).toBe(0);
    const wildcard = await health([], cleanEnv({ BURROW_ADMIN_PORT: port, BURROW_ADMIN_HOST: "0.0.0.0" }));
    expect(wildcard).toMatchObject({ code: 0, stdout: `ready (http://127.0.0.1:${port}/readyz)\n` });
  });

  test("a proxy in the environment is not used: the check is of this machine's own port", async () => {
    const dead = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.end(), data() {} } });
    try {
      const proxy = `http://127.0.0.1:${dead.port}`;
      const r = await health(["--admin-port", port], cleanEnv({ HTTP_PROXY: proxy, http_proxy: proxy, HTTPS_PROXY: proxy, ALL_PROXY: proxy }));
      expect(r.code).toBe(0);
    } finally {
      dead.stop(true);
    }
  });
});

describe("not healthy: exit 1 and one line", () => {
  test("nothing listens on the port", async () => {
    const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const free = l.port;
    l.stop(true);
    const r = await health(["--admin-port", String(free)]);
    expect(r).toMatchObject({ code: 1, stdout: "", stderr: `burrow: not healthy: no answer from http://127.0.0.1:${free}/readyz: ECONNREFUSED\n` });
  });

  test("a port that takes the connection and never answers: given up after --timeout", async () => {
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const r = await health(["--admin-port", String(silent.port), "--timeout", "1"]);
      expect(r).toMatchObject({ code: 1, stderr: `burrow: not healthy: no answer from http://127.0.0.1:${silent.port}/readyz: no answer within 1 s\n` });
      expect(r.ms).toBeGreaterThan(900);
      expect(r.ms).toBeLessThan(15_000);
    } finally {
      silent.stop(true);
    }
  });

  test("a server whose database takes no writes: its /readyz says 503, and the check names the failing check", async () => {
    const NOBODY = 65534;
    const dir = mkdtempSync(join(tmpdir(), "burrow-health-"));
    const dataDir = join(dir, "data");
    chmodSync(dir, 0o755);
    Bun.spawnSync(["mkdir", "-p", dataDir]);
    chownSync(dataDir, NOBODY, NOBODY);
    // as nobody, so that taking the write permission away holds (root's writes never fail)
    const sick = await startServer({ dataDir, prefix: ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"] });
    try {
      const sickPort = new URL(sick.adminUrl).port;
      expect((await health(["--admin-port", sickPort])).code).toBe(0);
      chmodSync(join(dataDir, "burrow.db"), 0o444);
      chmodSync(dataDir, 0o555);
      let r = await health(["--admin-port", sickPort]);
      // /readyz's checks are cached for a second: asked again until it has looked (bounded)
      for (let i = 0; i < 50 && r.code === 0; i++) {
        await Bun.sleep(100);
        r = await health(["--admin-port", sickPort]);
      }
      expect(r).toMatchObject({ code: 1, stdout: "", stderr: `burrow: not healthy: http://127.0.0.1:${sickPort}/readyz answered 503 (not ready: database)\n` });
    } finally {
      chmodSync(dataDir, 0o700);
      await sick.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("mistakes on the command line: exit 2", () => {
  test.each([
    [["--timeout", "0"], "burrow: --timeout must be a whole number of seconds from 1 to 300 (got '0')"],
    [["--timeout", "soon"], "burrow: --timeout must be a whole number of seconds from 1 to 300 (got 'soon')"],
    [["--admin-port", "0"], "burrow: --admin-port must be the server's admin port, 1 to 65535 (got '0')"],
    [["--admin-port", "http"], "burrow: --admin-port must be the server's admin port, 1 to 65535 (got 'http')"],
    [["--admin-host", "a b"], "burrow: --admin-host must be an address or a host name (got 'a b')"],
    [["extra"], "burrow: unexpected argument 'extra'"],
  ])("%p", async (args, line) => {
    expect(await health(args)).toMatchObject({ code: 2, stdout: "", stderr: `${line}\n` });
  });
});
