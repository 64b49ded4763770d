/**
 * `burrow server backup FILE` when all goes well: with the server running or
 * stopped, the data dir from --data-dir or BURROW_DATA_DIR, FILE relative or
 * with spaces; it prints what it did, the copy is private (0600) and sound,
 * a stopped server's data dir is left as it was found, and the restore
 * steps of docs/install.md bring the copy back as the live database.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { directoryHashes, dumpTables, integrityCheck } from "../harness/db.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer } from "../harness/server.ts";

let scratch: string;
let dataDir: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "burrow-backup-cmd-"));
  dataDir = join(scratch, "data dir");
  mkdirSync(dataDir);
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

const usernames = (file: string) => dumpTables(file).users!.map((u) => u.username);

test("while the server runs: --data-dir, a FILE with spaces, one line saying what it did, a private sound copy", async () => {
  await using server = await startServer({ dataDir });
  const api = await signedIn(server);
  await api.createUser("before-backup");
  const file = join(scratch, "my backups", "burrow copy.db");
  mkdirSync(join(scratch, "my backups"));

  const out = await runBurrow(["server", "backup", file, "--data-dir", dataDir]);

  expect(out.code).toBe(0);
  expect(out.stderr).toBe("");
  expect(out.stdout).toMatch(new RegExp(`^backed up ${escape(join(dataDir, "burrow.db"))} to ${escape(file)} \\(\\d+ bytes\\)\\n$`));
  expect(statSync(file).mode & 0o777).toBe(0o600);
  expect(integrityCheck(file)).toBe("ok");
  expect(usernames(file)).toContain("before-backup");
});

test("with the server stopped: BURROW_DATA_DIR, a relative FILE, and the data dir left exactly as it was", async () => {
  const before = directoryHashes(dataDir);
  const out = await runBurrow(["server", "backup", "relative copy.db"], { cwd: scratch, env: { BURROW_DATA_DIR: dataDir } });
  expect(out.code).toBe(0);
  expect(out.stdout).toContain(`to ${join(scratch, "relative copy.db")}`);
  expect(integrityCheck(join(scratch, "relative copy.db"))).toBe("ok");
  expect(directoryHashes(dataDir)).toEqual(before); // no -wal or -shm left behind
});

test("--data-dir wins over BURROW_DATA_DIR", async () => {
  const out = await runBurrow(["server", "backup", join(scratch, "flag wins.db"), "--data-dir", dataDir], { env: { BURROW_DATA_DIR: join(scratch, "nowhere") } });
  expect(out.code).toBe(0);
});

test("the restore of docs/install.md: stop, copy the backup to burrow.db, remove -wal and -shm, start; the copy's data is back", async () => {
  const restoreDir = join(scratch, "restored");
  {
    await using server = await startServer({ dataDir: restoreDir });
    const api = await signedIn(server);
    await api.createUser("kept");
    expect((await runBurrow(["server", "backup", join(scratch, "to restore.db"), "--data-dir", restoreDir])).code).toBe(0);
    await api.createUser("after-the-backup");
  }
  for (const suffix of ["", "-wal", "-shm"]) rmSync(join(restoreDir, `burrow.db${suffix}`), { force: true });
  copyFileSync(join(scratch, "to restore.db"), join(restoreDir, "burrow.db"));

  await using server = await startServer({ dataDir: restoreDir });
  const names = ((await (await signedIn(server)).get("/api/users")).body as { username: string }[]).map((u) => u.username);
  expect(names).toContain("kept");
  expect(names).not.toContain("after-the-backup");
  expect(readdirSync(restoreDir).filter((n) => n.includes(".bak-"))).toEqual([]); // same version: nothing to upgrade, no backup
});

test("--help says how to use it and how to restore", async () => {
  const out = await runBurrow(["server", "backup", "--help"]);
  expect(out.code).toBe(0);
  expect(out.stdout).toStartWith("Usage: burrow server backup FILE");
  expect(out.stdout).toContain("To restore");
});

function escape(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
