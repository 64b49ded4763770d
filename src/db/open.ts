/**
 * Opens (creating if needed) the SQLite database and brings its schema up to
 * date from the migrations embedded in the program.
 */
import { Database } from "bun:sqlite";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import type { MigrationMeta } from "drizzle-orm/migrator";
import { migrations } from "./migrations.ts";
import * as schema from "./schema.ts";

export type Db = BunSQLiteDatabase<typeof schema>;

export interface OpenedDb {
  db: Db;
  sqlite: Database;
  path: string;
  close(): void;
}

/** How long a writer waits for another connection's lock before failing. */
const BUSY_TIMEOUT_MS = 5000;

export function openDatabase(dataDir: string): OpenedDb {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const path = join(dataDir, "burrow.db");
  const sqlite = new Database(path, { create: true, strict: true });
  sqlite.exec("PRAGMA journal_mode = WAL");
  sqlite.exec("PRAGMA synchronous = NORMAL");
  sqlite.exec("PRAGMA foreign_keys = ON");
  sqlite.exec(`PRAGMA busy_timeout = ${BUSY_TIMEOUT_MS}`);
  const db = drizzle({ client: sqlite, schema });
  applyMigrations(db);
  return {
    db,
    sqlite,
    path,
    close() {
      // folds the WAL back into the main file so a copied burrow.db is whole
      sqlite.exec("PRAGMA wal_checkpoint(TRUNCATE)");
      sqlite.close();
    },
  };
}

function applyMigrations(db: Db): void {
  const metas: MigrationMeta[] = migrations.map((m) => ({
    sql: m.sql.split("--> statement-breakpoint"),
    bps: m.breakpoints,
    folderMillis: m.when,
    hash: new Bun.CryptoHasher("sha256").update(m.sql).digest("hex"),
  }));
  // drizzle's own migrator, fed from embedded text instead of the drizzle/ folder;
  // it keeps the same __drizzle_migrations bookkeeping as drizzle-kit
  (db as unknown as { dialect: { migrate(m: MigrationMeta[], s: unknown): void }; session: unknown }).dialect.migrate(
    metas,
    (db as unknown as { session: unknown }).session,
  );
}
