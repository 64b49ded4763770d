/**
 * Upgrades that lose nothing. A newer burrow is played by opening a database
 * with one more migration than this program has, and a newer version:
 * before the first write it copies the database to burrow.db.bak-<old
 * version> (a sound SQLite file holding the old data) and logs one line;
 * nothing is copied when there is nothing to apply, and an earlier backup of
 * the same name is never replaced. Then this program, now the older one, is
 * refused by the database the newer one wrote: `burrow server` exits 2
 * naming both versions and what to do, and no file in the data dir changes.
 */
import { afterAll, expect, spyOn, test } from "bun:test";
import { Database } from "bun:sqlite";
import { copyFileSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrations } from "../../src/db/migrations.ts";
import { openDatabase } from "../../src/db/open.ts";
import type { Migration } from "../../src/db/plan.ts";
import { encodeVersion } from "../../src/db/version-record.ts";
import { VERSION } from "../../src/version.ts";
import { dumpTables, directoryHashes, fixtureDataDir, integrityCheck, sha256, userVersion } from "../harness/db.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer } from "../harness/server.ts";

const NEWER = "9.0.0";
const last = migrations.at(-1)!;
/** What a later release might add: a table, and a column on an old one. */
const newer: Migration = {
  tag: "9000_test_widgets",
  when: last.when + 86_400_000,
  sql: "CREATE TABLE `widgets` (`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL, `name` text NOT NULL);\n--> statement-breakpoint\nALTER TABLE `users` ADD `nickname` text;",
};
const newerSet = [...migrations, newer];

const dirs: string[] = [];
const track = (dir: string) => (dirs.push(dir), dir);
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** What log.info printed while `fn` ran (it writes with console.log). */
function logged(fn: () => void): string[] {
  const lines: string[] = [];
  const spy = spyOn(console, "log").mockImplementation((...args: unknown[]) => void lines.push(args.join(" ")));
  try {
    fn();
  } finally {
    spy.mockRestore();
  }
  return lines;
}

function openAs(dataDir: string, set: readonly Migration[], version: string): string[] {
  return logged(() => openDatabase(dataDir, { migrations: set, version }).close());
}

const backups = (dir: string) => readdirSync(dir).filter((n) => n.includes(".bak-")).sort();

/** `burrow server` on a data dir, expected to refuse it: exits by itself. */
async function serverOn(dataDir: string) {
  return runBurrow(["server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--agent-port", "0", "--data-dir", dataDir], {
    env: { BURROW_ADMIN_PASSWORD: "correct-horse-battery" },
  });
}

test("upgrading the 0.1.0 fixture backs it up to burrow.db.bak-0.1.0 first and logs one line saying so", () => {
  const dir = track(fixtureDataDir("0.1.0"));
  const db = join(dir, "burrow.db");
  const original = dumpTables(db);

  const lines = openAs(dir, newerSet, NEWER);

  const backup = join(dir, "burrow.db.bak-0.1.0");
  const said = lines.filter((l) => l.includes("backed up"));
  expect(said).toHaveLength(1);
  expect(said[0]).toContain(`backup=${backup}`);
  expect(said[0]).toContain("from=0.1.0");
  expect(said[0]).toContain(`to=${NEWER}`);
  // every migration after the fixture's one, this program's and the newer one's
  expect(said[0]).toContain(`migrations=${newerSet.slice(1).map((m) => m.tag).join(",")}`);
  // the backup: sound, the old data, the old schema, no version record (as 0.1.0 left it)
  expect(backups(dir)).toEqual(["burrow.db.bak-0.1.0"]);
  expect(integrityCheck(backup)).toBe("ok");
  expect(dumpTables(backup)).toEqual(original);
  expect(userVersion(backup)).toBe(0);
  // the database: upgraded, every old row still there, the new version recorded
  const upgraded = dumpTables(db);
  expect(upgraded.widgets).toEqual([]);
  // columns added since 0.1.0 hold their defaults: require_auth off, allow_cidrs empty, no company sign-in
  const added = upgraded.users!.map(({ nickname, require_auth, allow_cidrs, oidc_subject, can_share, ...rest }) => {
    expect([nickname, require_auth, allow_cidrs, oidc_subject, can_share]).toEqual([null, 0, "", null, 1]);
    return rest;
  });
  expect(added).toEqual(original.users!);
  expect(upgraded.tokens).toEqual(original.tokens!);
  expect(upgraded.__drizzle_migrations!.map((m) => m.created_at)).toEqual([...migrations.map((m) => m.when), newer.when]);
  expect(userVersion(db)).toBe(encodeVersion(NEWER));
});

test("opening again with nothing new to apply makes no backup and logs none", () => {
  const dir = track(fixtureDataDir("0.1.0"));
  openAs(dir, newerSet, NEWER);
  const first = sha256(join(dir, "burrow.db.bak-0.1.0"));
  expect(openAs(dir, newerSet, NEWER).filter((l) => l.includes("backed up"))).toEqual([]);
  expect(backups(dir)).toEqual(["burrow.db.bak-0.1.0"]);
  expect(sha256(join(dir, "burrow.db.bak-0.1.0"))).toBe(first);
});

test("a fresh database gets no backup, on its first start or its next", async () => {
  const dir = track(mkdtempSync(join(tmpdir(), "burrow-fresh-")));
  for (let i = 0; i < 2; i++) {
    const server = await startServer({ dataDir: dir });
    expect(server.output.text()).not.toContain("backed up");
    await server.stop();
  }
  expect(backups(dir)).toEqual([]);
  expect(userVersion(join(dir, "burrow.db"))).toBe(encodeVersion(VERSION));
});

test("a second upgrade from the same version keeps the first backup and writes burrow.db.bak-0.1.0-2", () => {
  const dir = track(fixtureDataDir("0.1.0"));
  openAs(dir, newerSet, NEWER);
  const first = sha256(join(dir, "burrow.db.bak-0.1.0"));
  // the operator went back: restored the backup as burrow.db, used 0.1.0 a while, upgrades again
  for (const n of ["burrow.db", "burrow.db-wal", "burrow.db-shm"]) rmSync(join(dir, n), { force: true });
  copyFileSync(join(dir, "burrow.db.bak-0.1.0"), join(dir, "burrow.db"));
  withWrite(join(dir, "burrow.db"), (db) => db.run("UPDATE users SET max_tunnels = 7 WHERE username = 'bob'"));

  const lines = openAs(dir, newerSet, NEWER);

  expect(lines.find((l) => l.includes("backed up"))).toContain(`backup=${join(dir, "burrow.db.bak-0.1.0-2")}`);
  expect(backups(dir)).toEqual(["burrow.db.bak-0.1.0", "burrow.db.bak-0.1.0-2"]);
  expect(sha256(join(dir, "burrow.db.bak-0.1.0"))).toBe(first);
  const second = dumpTables(join(dir, "burrow.db.bak-0.1.0-2"));
  expect(second.users!.find((u) => u.username === "bob")!.max_tunnels).toBe(7);
});

test("a database with a migration this burrow does not know is refused: exit 2, both versions named, no file changed", async () => {
  const dir = track(fixtureDataDir("0.1.0"));
  openAs(dir, newerSet, NEWER);
  const before = directoryHashes(dir);

  const out = await serverOn(dir);

  expect(out.timedOut).toBe(false);
  expect(out.code).toBe(2);
  expect(out.stdout).not.toContain("listening");
  const message = out.stderr.trim();
  expect(message.split("\n")).toHaveLength(1);
  expect(message).toStartWith("burrow: ");
  expect(message).toContain(`burrow ${NEWER}`);
  expect(message).toContain(`this is burrow ${VERSION}`);
  expect(message).toContain("a migration this burrow does not know");
  expect(message).toContain(`Run burrow ${NEWER} or newer`);
  expect(message).toContain(join(dir, "burrow.db.bak-0.1.0")); // what to restore to go back
  expect(directoryHashes(dir)).toEqual(before);
});

test("a database recorded by a newer burrow is refused even when it has no unknown migration", async () => {
  const dir = track(fixtureDataDir("0.1.0"));
  withWrite(join(dir, "burrow.db"), (db) => db.run(`PRAGMA user_version = ${encodeVersion("9.1.0")}`));
  const before = directoryHashes(dir);

  const out = await serverOn(dir);

  expect(out.code).toBe(2);
  expect(out.stderr).toContain("burrow 9.1.0");
  expect(out.stderr).toContain(`this is burrow ${VERSION}`);
  expect(out.stderr).toContain("Run burrow 9.1.0 or newer");
  expect(directoryHashes(dir)).toEqual(before);
});

test("a database with tables but no record of burrow's migrations is refused as not burrow's", async () => {
  const dir = track(mkdtempSync(join(tmpdir(), "burrow-foreign-")));
  withWrite(join(dir, "burrow.db"), (db) => db.run("CREATE TABLE notes (id integer PRIMARY KEY, body text)"));
  const before = directoryHashes(dir);

  const out = await serverOn(dir);

  expect(out.code).toBe(2);
  expect(out.stderr).toContain("not a burrow database");
  expect(directoryHashes(dir)).toEqual(before);
  expect(existsSync(join(dir, "burrow.db-wal"))).toBe(false);
});

/** Changes a database file the way another program would, leaving no -wal beside it. */
function withWrite(path: string, write: (db: Database) => void): void {
  const db = new Database(path, { create: true, strict: true });
  try {
    write(db);
  } finally {
    db.close();
  }
}
