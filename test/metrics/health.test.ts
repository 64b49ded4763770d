/**
 * GET /healthz and GET /readyz on a real server: no session needed, tiny
 * bodies, and /readyz really turns 503 when the database cannot take a
 * write (its data dir on a small tmpfs that the test fills up, or, where the
 * test cannot mount one, a data dir and database made read-only by chmod for
 * a server that is not root: the test's own user, or nobody when the test
 * runs as root) and 200 again once it can.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startServer, type TestServer } from "../harness/server.ts";

async function readyz(server: TestServer): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.adminUrl}/readyz`);
  return { status: res.status, body: await res.json() };
}

/** Asks /readyz until it answers `status` (the result is cached for a second); at most 5 s. */
async function readyzUntil(server: TestServer, status: number): Promise<{ status: number; body: any }> {
  const deadline = Date.now() + 5_000;
  let last = await readyz(server);
  while (last.status !== status && Date.now() < deadline) {
    await Bun.sleep(100);
    last = await readyz(server);
  }
  return last;
}

describe("on a server with a plain data dir", () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer();
  });
  afterAll(() => server?.stop());

  test("/healthz: 200 ok, no session, not cached", async () => {
    const res = await fetch(`${server.adminUrl}/healthz`);
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("ok\n");
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  test("/readyz: 200 {status: ready} with the database, the public port and the agents' port up", async () => {
    const res = await fetch(`${server.adminUrl}/readyz`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "ready" });
    expect(res.headers.get("cache-control")).toBe("no-store");
  });

  test("a flood of /readyz costs the database about one probe a second, and leaves no probe file behind", async () => {
    const wal = join(server.dataDir, "burrow.db-wal");
    await readyz(server);
    const before = statSync(wal).size;
    const answers = await Promise.all(Array.from({ length: 300 }, () => readyz(server)));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    // each probe that runs commits one page (about 4 KiB) to the WAL; 300 uncached probes would be 1.2 MiB
    expect(statSync(wal).size - before).toBeLessThanOrEqual(3 * 4200);
    expect(readdirSync(server.dataDir).filter((f) => f.includes("probe"))).toEqual([]);
  });

  test("other methods on them: 405", async () => {
    for (const path of ["/healthz", "/readyz", "/metrics"]) {
      expect((await fetch(`${server.adminUrl}${path}`, { method: "POST" })).status).toBe(405);
    }
  });
});

/** The user a root test runs the server as when it cannot mount: chmod binds it, as it does not bind root. */
const NOBODY = 65534;

/**
 * How this machine lets the test take the database's writes away: a tmpfs
 * to fill (root that may mount), chmod (not root), chmod with the server run
 * as nobody (root that may not mount, e.g. in a container), or neither.
 */
function unwritableMethod(): { kind: "tmpfs" | "chmod" | "chmod as nobody" } | { kind: "none"; why: string } {
  if (process.getuid?.() !== 0) return { kind: "chmod" };
  const probe = mkdtempSync(join(tmpdir(), "burrow-mount-probe-"));
  try {
    const mounted = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", probe], { stderr: "pipe" });
    if (mounted.exitCode === 0) {
      Bun.spawnSync(["umount", probe]);
      return { kind: "tmpfs" };
    }
    const setpriv = Bun.spawnSync(["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", "true"], { stderr: "pipe" });
    if (setpriv.exitCode === 0) return { kind: "chmod as nobody" };
    return { kind: "none", why: `root, but can neither mount a tmpfs (${mounted.stderr.toString().trim()}) nor run as nobody (${setpriv.stderr.toString().trim()})` };
  } finally {
    rmSync(probe, { recursive: true, force: true });
  }
}

const method = unwritableMethod();
if (method.kind === "none") console.warn(`readyz unwritable-database test skipped: ${method.why}`);

describe.skipIf(method.kind === "none")(`a database that cannot take a write (${method.kind})`, () => {
  test("/readyz turns 503 naming the database, says why in the log, and is ready again once writes go through", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-readyz-"));
    const dataDir = join(dir, "data");
    let mounted = false;
    let server: TestServer | undefined;
    try {
      if (method.kind === "tmpfs") {
        Bun.spawnSync(["mkdir", "-p", dataDir]);
        // room for the database and its WAL, and not much more
        const m = Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", dataDir], { stderr: "pipe" });
        expect(m.exitCode).toBe(0);
        mounted = true;
      }
      if (method.kind === "chmod as nobody") {
        chmodSync(dir, 0o755);
        Bun.spawnSync(["mkdir", "-p", dataDir]);
        chownSync(dataDir, NOBODY, NOBODY);
      }
      const prefix = method.kind === "chmod as nobody" ? ["setpriv", `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups"] : [];
      server = await startServer({ dataDir, prefix });
      expect((await readyzUntil(server, 200)).body).toEqual({ status: "ready" });

      const filler = join(dataDir, "filler");
      if (method.kind === "tmpfs") {
        // fill the disk: write until there is no space left
        let full = false;
        for (let i = 0; i < 64 && !full; i++) {
          try {
            writeFileSync(filler, new Uint8Array(256 * 1024), { flag: "a" });
          } catch (err) {
            expect((err as { code?: string }).code).toBe("ENOSPC");
            full = true;
          }
        }
        expect(full).toBe(true);
      } else {
        chmodSync(join(dataDir, "burrow.db"), 0o444);
        chmodSync(dataDir, 0o555);
      }

      const down = await readyzUntil(server, 503);
      expect(down).toEqual({ status: 503, body: { status: "not ready", not_ready: ["database"] } });
      const said = await server.output.waitFor(/not ready.*database/, 2_000);
      expect(said).toMatch(method.kind === "tmpfs" ? /ENOSPC|SQLITE_FULL|no space/i : /EACCES|permission/i);
      // the answer names the failing check only: no path or error text for whoever asks
      expect(JSON.stringify(down.body)).not.toContain(dataDir);
      // /healthz is about the process, which is fine
      expect((await fetch(`${server.adminUrl}/healthz`)).status).toBe(200);

      if (method.kind === "tmpfs") rmSync(filler);
      else {
        chmodSync(dataDir, 0o700);
        chmodSync(join(dataDir, "burrow.db"), 0o600);
      }
      expect((await readyzUntil(server, 200)).body).toEqual({ status: "ready" });
      await server.output.waitFor(/ready again/, 2_000);
    } finally {
      if (method.kind !== "tmpfs" && existsSync(dataDir)) chmodSync(dataDir, 0o700);
      await server?.stop();
      if (mounted) Bun.spawnSync(["umount", "-l", dataDir]);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});
