/**
 * Backups asked for wrongly. The command: a FILE that exists is never
 * overwritten, a FILE in a directory that does not exist, a data dir with no
 * database (none is created), no FILE or two: each one "burrow:" line, exit
 * 1 (2 for the command-line mistakes), nothing written. The API: without a
 * session, as an admin demoted since, from another site, with GET: the same
 * answers as every other admin-only POST. A client that goes away in the
 * middle of a download leaves no file behind and no descriptor open.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { sha256 } from "../harness/db.ts";
import { runBurrow, type Exited } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let api: AdminClient;
let scratch: string;

beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), "burrow-backup-bad-"));
  server = await startServer();
  api = await signedIn(server);
});
afterAll(async () => {
  await server?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

function expectOneLine(out: Exited, code: number, mentions: string) {
  expect(out.timedOut).toBe(false);
  expect(out.code).toBe(code);
  expect(out.stdout).toBe("");
  const lines = out.stderr.trimEnd().split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]!).toStartWith("burrow:");
  expect(lines[0]!).toContain(mentions);
}

const backup = (...args: string[]) => runBurrow(["server", "backup", ...args]);

describe("burrow server backup", () => {
  test("refuses a FILE that exists, and leaves it as it was", async () => {
    const file = join(scratch, "already here.db");
    writeFileSync(file, "precious");
    const hash = sha256(file);
    expectOneLine(await backup(file, "--data-dir", server.dataDir), 1, "already exists");
    expect(sha256(file)).toBe(hash);
  });

  test("refuses an existing empty FILE too (SQLite itself would write into it)", async () => {
    const file = join(scratch, "empty.db");
    writeFileSync(file, "");
    expectOneLine(await backup(file, "--data-dir", server.dataDir), 1, "already exists");
    expect(Bun.file(file).size).toBe(0);
  });

  test("refuses a FILE in a directory that does not exist, and creates none", async () => {
    const dir = join(scratch, "no such dir");
    expectOneLine(await backup(join(dir, "copy.db"), "--data-dir", server.dataDir), 1, `no such directory: ${dir}`);
    expect(existsSync(dir)).toBe(false);
  });

  test("refuses a data dir without a database, and creates neither", async () => {
    const dir = join(scratch, "empty data");
    expectOneLine(await backup(join(scratch, "x.db"), "--data-dir", dir), 1, `no database at ${join(dir, "burrow.db")}`);
    expect(existsSync(dir)).toBe(false);
    expect(existsSync(join(scratch, "x.db"))).toBe(false);
  });

  test("a missing FILE or a second one is a command-line mistake: exit 2", async () => {
    expectOneLine(await backup("--data-dir", server.dataDir), 2, "needs FILE");
    expectOneLine(await backup("a.db", "b.db", "--data-dir", server.dataDir), 2, "unexpected argument 'b.db'");
    expectOneLine(await backup("a.db", "--force"), 2, "unknown flag --force");
    expect(existsSync(join(scratch, "a.db"))).toBe(false);
  });

  test("leaves no partial file beside FILE when it fails", async () => {
    expect(readdirSync(scratch).filter((n) => n.includes(".partial-"))).toEqual([]);
  });
});

describe("POST /api/backup", () => {
  test("without a session: 401 with the same error as any admin endpoint", async () => {
    const anon = new AdminClient(server.adminUrl);
    const res = await anon.post("/api/backup");
    expect(res.status).toBe(401);
    expect(res.body).toEqual((await anon.post("/api/users", {})).body);
    expect(res.body).toEqual({ error: "authentication required" });
  });

  test("as an admin demoted since signing in: 401 (the new role ended the session), as for every other admin-only POST", async () => {
    const id = await api.createUser("soon-demoted", { role: "admin", password: "demoted-password" });
    const client = new AdminClient(server.adminUrl);
    expect((await client.login("soon-demoted", "demoted-password")).status).toBe(200);
    expect((await api.put(`/api/users/${id}`, { role: "user" })).status).toBe(200);
    const res = await client.post("/api/backup");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: "session expired or invalid" });
    expect(res.body).toEqual((await client.post("/api/users", { username: "x", password: "password-123" })).body);
  });

  test("from another site: 403, the cross-site refusal", async () => {
    const res = await api.call("POST", "/api/backup", undefined, { Origin: "http://evil.example" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: "cross-site request refused" });
  });

  test("with GET: 405 naming POST", async () => {
    const res = await api.get("/api/backup");
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("POST");
  });

  test("a client that leaves mid-download: no file left in the data dir, the copy's descriptor closed, the log says it was cut", async () => {
    // a database bigger than the sockets' buffers, so the download is still going when the client leaves
    const dataDir = join(scratch, "big data");
    {
      await using first = await startServer({ dataDir });
    }
    const sqlite = new Database(join(dataDir, "burrow.db"), { strict: true });
    sqlite.run("CREATE TABLE filler (b blob)");
    for (let i = 0; i < 64; i++) sqlite.run("INSERT INTO filler VALUES (randomblob(256 * 1024))");
    sqlite.close();

    await using big = await startServer({ dataDir });
    const admin = await signedIn(big);
    const abort = new AbortController();
    const res = await fetch(`${big.adminUrl}/api/backup`, { method: "POST", headers: { Cookie: admin.cookie! }, signal: abort.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-disposition")).toMatch(/^attachment; filename="burrow-\d+\.\d+\.\d+-\d{8}T\d{6}Z\.db"$/);
    const openCopies = () => {
      const fdDir = `/proc/${big.proc.pid}/fd`;
      if (!existsSync(fdDir)) return undefined; // no /proc (not Linux): the log line is the check
      return readdirSync(fdDir).filter((fd) => {
        try {
          return readlinkSync(join(fdDir, fd)).includes(".partial-");
        } catch {
          return false;
        }
      }).length;
    };
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    // while it streams, the copy is open but already unlinked
    expect(readdirSync(dataDir).filter((n) => n.includes(".partial-"))).toEqual([]);
    if (openCopies() !== undefined) expect(openCopies()).toBe(1);
    abort.abort();
    await reader.cancel().catch(() => {});

    await big.output.waitFor(/database backup sent .*complete=false/, 10_000);
    await waitUntil(() => (openCopies() ?? 0) === 0, 5_000, "the server to close the copy it was sending");
    expect(readdirSync(dataDir).filter((n) => n.includes(".partial-"))).toEqual([]);
  });
});
