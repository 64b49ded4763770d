/**
 * Opens (creating if needed) the SQLite database and brings its schema up to
 * date from the migrations embedded in the program, losing nothing on the
 * way: the file is read first without writing (plan.ts decides); a database
 * written by a newer burrow is refused untouched; one that has migrations to
 * apply is copied to `burrow.db.bak-<its version>` before the first of them.
 */
import { Database } from "bun:sqlite";
import { existsSync, mkdirSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { drizzle } from "drizzle-orm/bun-sqlite";
import { log } from "../log.ts";
import { VERSION } from "../version.ts";
import { copyDatabase, sweepStaleCopies } from "./copy.ts";
import { readDatabaseState } from "./inspect.ts";
import { applyMigrations } from "./migrate.ts";
import { migrations as embedded } from "./migrations.ts";
import { planOpen, type Migration, type OpenPlan } from "./plan.ts";
import * as schema from "./schema.ts";
import { sqliteStore, type Db, type Store } from "./store.ts";

export type { Db };

export const DB_FILE = "burrow.db";

export interface OpenedDb {
  db: Db;
  /** What core uses (store.ts). */
  store: Store;
  sqlite: Database;
  path: string;
  close(): void;
}

export interface OpenOptions {
  /** The migrations this program knows; tests pass a longer list to play a newer burrow. */
  migrations?: readonly Migration[];
  /** This program's version, recorded in the database; tests pass another to play a newer burrow. */
  version?: string;
}

/** How long a writer waits for another connection's lock before failing. */
const BUSY_TIMEOUT_MS = 5000;
/** A copy still being written is younger than this; an older one was left by a process that died. */
const STALE_COPY_MS = 60 * 60 * 1000;

export function openDatabase(dataDir: string, options: OpenOptions = {}): OpenedDb {
  const migrations = options.migrations ?? embedded;
  const version = options.version ?? VERSION;
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, DB_FILE);
  const plan: OpenPlan = existsSync(path)
    ? planOpen({ state: readDatabaseState(path), migrations, version, path, backups: upgradeBackups(dataDir, version) })
    : { kind: "create", pending: [...migrations] };
  if (plan.kind === "refuse") throw plan.error;
  sweepStaleCopies(dataDir, DB_FILE, STALE_COPY_MS);

  const sqlite = new Database(path, { create: true, strict: true });
  try {
    sqlite.run(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
    if (plan.kind === "upgrade") {
      // before anything is written, journal mode included
      const backup = freeBackupPath(dataDir, plan.from);
      copyDatabase(sqlite, backup);
      log.info("database backed up before upgrading it", { backup, from: plan.from, to: version, migrations: plan.pending.map((m) => m.tag).join(",") });
    }
    sqlite.run("PRAGMA journal_mode = WAL");
    sqlite.run("PRAGMA synchronous = NORMAL");
    sqlite.run("PRAGMA foreign_keys = ON");
    applyMigrations(sqlite, migrations, version);
  } catch (err) {
    sqlite.close();
    throw err;
  }
  const db = drizzle({ client: sqlite, schema });
  return {
    db,
    store: sqliteStore(sqlite, db, schema),
    sqlite,
    path,
    close() {
      // folds the WAL back into the main file so a copied burrow.db is whole
      sqlite.run("PRAGMA wal_checkpoint(TRUNCATE)");
      sqlite.close();
    },
  };
}

/** `burrow.db.bak-<version>` */
const backupName = (version: string) => `${DB_FILE}.bak-${version}`;

/**
 * Where the backup before an upgrade from `from` goes: `burrow.db.bak-<from>`,
 * or, when an earlier upgrade from the same version left that (say the
 * operator went back to it and upgraded again), `burrow.db.bak-<from>-2`,
 * `-3`, ...: an older backup is never overwritten.
 */
export function freeBackupPath(dataDir: string, from: string): string {
  const first = join(dataDir, backupName(from));
  if (!existsSync(first)) return first;
  for (let n = 2; ; n++) {
    const next = `${first}-${n}`;
    if (!existsSync(next)) return next;
  }
}

/** The backups an upgrade from `version` left in `dataDir`, oldest first. */
export function upgradeBackups(dataDir: string, version: string): string[] {
  const first = backupName(version);
  const pattern = new RegExp(`^${first.replaceAll(".", "\\.")}(-([0-9]+))?$`);
  return readdirSync(dataDir)
    .map((name) => ({ name, n: pattern.exec(name) }))
    .filter((e) => e.n !== null)
    .sort((a, b) => Number(a.n![2] ?? 1) - Number(b.n![2] ?? 1))
    .map((e) => join(dataDir, e.name));
}
