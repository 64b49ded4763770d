/**
 * Looking into database files from tests without changing them: every table
 * as rows, SQLite's own integrity check, the version record, a file's hash,
 * and the fixture of a released version copied into a temp data dir.
 */
import { Database } from "bun:sqlite";
import { copyFileSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openReadOnly } from "../../src/db/inspect.ts";

export type Row = Record<string, unknown>;
export type Dump = Record<string, Row[]>;

const FIXTURES = join(import.meta.dir, "..", "fixtures");

export interface Fixture {
  version: string;
  admin: { username: string; password: string };
  users: { username: string; password: string }[];
  tokens: Record<string, string>;
}

export const fixtureInfo = (version: string): Fixture => JSON.parse(readFileSync(join(FIXTURES, `burrow-${version}.json`), "utf8"));

/** A temp data dir holding a copy of the fixture as burrow.db (the committed file is never opened in place). */
export function fixtureDataDir(version: string): string {
  const dir = mkdtempSync(join(tmpdir(), `burrow-fixture-${version}-`));
  copyFileSync(join(FIXTURES, `burrow-${version}.db`), join(dir, "burrow.db"));
  return dir;
}

/** Runs `read` on a read-only connection that leaves no -wal or -shm behind when none was there. */
export function withDatabase<T>(path: string, read: (sqlite: Database) => T): T {
  const sqlite = openReadOnly(path);
  try {
    return read(sqlite);
  } finally {
    sqlite.close();
  }
}

/** Every table's rows, in rowid order, by table name (sqlite's own tables left out). */
export function dumpTables(path: string): Dump {
  return withDatabase(path, (sqlite) => {
    const tables = sqlite
      .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
      .all();
    return Object.fromEntries(tables.map(({ name }) => [name, sqlite.query<Row, []>(`SELECT * FROM "${name}" ORDER BY rowid`).all()]));
  });
}

/** The columns of each table's primary key (empty for a table without one). */
export function primaryKeys(path: string): Record<string, string[]> {
  return withDatabase(path, (sqlite) => {
    const tables = sqlite
      .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .all();
    return Object.fromEntries(
      tables.map(({ name }) => [
        name,
        sqlite
          .query<{ name: string; pk: number }, []>(`PRAGMA table_info("${name}")`)
          .all()
          .filter((c) => c.pk > 0)
          .sort((a, b) => a.pk - b.pk)
          .map((c) => c.name),
      ]),
    );
  });
}

export const integrityCheck = (path: string) =>
  withDatabase(path, (sqlite) => sqlite.query<{ integrity_check: string }, []>("PRAGMA integrity_check").all().map((r) => r.integrity_check).join("; "));

export const userVersion = (path: string) => withDatabase(path, (sqlite) => sqlite.query<{ user_version: number }, []>("PRAGMA user_version").get()!.user_version);

export const sha256 = (path: string) => new Bun.CryptoHasher("sha256").update(readFileSync(path)).digest("hex");

/** Every file in a directory with its hash: what "nothing changed" compares. */
export function directoryHashes(dir: string): Record<string, string> {
  return Object.fromEntries(readdirSync(dir).sort().map((name) => [name, sha256(join(dir, name))]));
}
