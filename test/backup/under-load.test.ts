/**
 * Backups of a server at work: two agents carry visitors' requests (so the
 * traffic meter writes to the database every 2 s), an admin creates users
 * one after another, and meanwhile `burrow server backup` (another process)
 * and POST /api/backup (the server's own connection) each take copies,
 * side by side. Every copy is a sound SQLite database that holds every user
 * whose creation was acknowledged (201) before the backup began, the
 * tunnel's user, token and traffic, and nothing is left in the data dir.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { dumpTables, integrityCheck } from "../harness/db.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

const ROUNDS = 3;
/** The writer stops here at the latest, whatever happens to the test. */
const MAX_USERS = 400;
const BODY = new Uint8Array(32 * 1024).fill(0x61);

let server: TestServer;
let api: AdminClient;
let scratch: string;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(BODY) });

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  scratch = join(mkdtempSync(join(tmpdir(), "burrow-backups-")), "backups with spaces");
  mkdirSync(scratch);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  rmSync(join(scratch, ".."), { recursive: true, force: true });
});

/** POST /api/backup, the body saved to `file`. */
async function downloadBackup(file: string): Promise<Response> {
  const res = await fetch(`${server.adminUrl}/api/backup`, { method: "POST", headers: { Cookie: api.cookie! } });
  expect(res.status).toBe(200);
  await Bun.write(file, await res.arrayBuffer());
  return res;
}

function expectWholeCopy(file: string, acknowledged: readonly string[], tunnelUser: number) {
  expect(integrityCheck(file)).toBe("ok");
  const copy = dumpTables(file);
  const names = new Set(copy.users!.map((u) => u.username));
  const missing = acknowledged.filter((n) => !names.has(n));
  expect(missing).toEqual([]);
  expect(copy.tokens!.some((t) => t.user_id === tunnelUser && t.enabled === 1)).toBe(true);
  const traffic = copy.traffic_daily!.filter((r) => r.user_id === tunnelUser);
  expect(traffic.reduce((sum, r) => sum + (r.bytes_out as number), 0)).toBeGreaterThan(0);
}

test(
  "copies taken by the command and the API while tunnels carry traffic and users are created hold everything acknowledged before them",
  async () => {
    const tunnelUser = await api.createUser("tunnel-owner");
    const token = await api.createToken(tunnelUser);
    const agentOptions = { kind: "http" as const, target: upstream.port!, server: server.edgeUrl, token };
    await using agentA = await startAgent({ ...agentOptions, args: ["--subdomain", "load-a"] });
    await using agentB = await startAgent({ ...agentOptions, args: ["--subdomain", "load-b"] });

    let running = true;
    const acknowledged: string[] = [];
    const writer = (async () => {
      for (let i = 0; running && i < MAX_USERS; i++) {
        const res = await api.post("/api/users", { username: `load-${i}`, password: "password-123" });
        if (res.status !== 201) throw new Error(`creating load-${i}: ${res.status} ${JSON.stringify(res.body)}`);
        acknowledged.push(`load-${i}`);
      }
    })();
    let visits = 0;
    const visitor = (sub: string) =>
      (async () => {
        while (running) {
          const res = await tunnelFetch(server.edgePort, sub, "/data");
          if (res.status !== 200) throw new Error(`visitor of ${sub}: ${res.status}`);
          await res.arrayBuffer();
          visits++;
        }
      })();
    const visitors = [visitor(agentA.subdomain!), visitor(agentB.subdomain!)];

    try {
      // the meter has written the tunnel's bytes to the database at least once (it flushes every 2 s)
      await waitUntil(async () => (await api.get(`/api/users/${tunnelUser}`)).body.traffic_used > 0, 10_000, "traffic in the database");
      for (let round = 1; round <= ROUNDS; round++) {
        const wanted = acknowledged.length + 3;
        await waitUntil(() => acknowledged.length >= wanted, 15_000, `three more users created before round ${round}`);
        const cliFile = join(scratch, `command backup ${round}.db`);
        const apiFile = join(scratch, `api backup ${round}.db`);
        const beforeCli = [...acknowledged];
        const cli = runBurrow(["server", "backup", cliFile, "--data-dir", server.dataDir]);
        const beforeApi = [...acknowledged];
        const [out, res] = await Promise.all([cli, downloadBackup(apiFile)]);

        expect(out.code).toBe(0);
        expect(out.stdout).toContain(`to ${cliFile}`);
        expect(res.headers.get("content-type")).toBe("application/vnd.sqlite3");
        expectWholeCopy(cliFile, beforeCli, tunnelUser);
        expectWholeCopy(apiFile, beforeApi, tunnelUser);
      }
    } finally {
      running = false;
      const settled = await Promise.allSettled([writer, ...visitors]);
      for (const s of settled) if (s.status === "rejected") throw s.reason;
    }
    expect(visits).toBeGreaterThan(0);
    // nothing left in the data dir by either kind of backup
    expect(readdirSync(server.dataDir).filter((n) => n !== "burrow.db" && n !== "burrow.db-wal" && n !== "burrow.db-shm")).toEqual([]);
  },
  60_000,
);
