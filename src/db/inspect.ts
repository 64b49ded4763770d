/**
 * What is in a database file, read without writing to it: whether it has
 * any tables, which migrations were applied to it, and which burrow version
 * recorded itself last. Read before the server opens it for writing, so a
 * database it must refuse is left exactly as it was.
 */
import { Database, constants } from "bun:sqlite";
import { existsSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { decodeVersion } from "./version-record.ts";

/** drizzle-kit's bookkeeping table, which our migrator keeps the same way. */
export const MIGRATIONS_TABLE = "__drizzle_migrations";

/** How long a reader waits for a writer's lock (a checkpoint, a recovery) before failing. */
export const READ_BUSY_TIMEOUT_MS = 5000;

export interface AppliedMigration {
  hash: string;
  /** The migration's journal timestamp: what drizzle orders and identifies migrations by. */
  createdAt: number;
}

export interface DbState {
  /** Tables other than the migrations table (which drizzle creates before anything else). */
  tables: string[];
  /** undefined: there is no migrations table at all. */
  applied: AppliedMigration[] | undefined;
  /** The version recorded in the header (version-record.ts); undefined when none is. */
  recorded: string | undefined;
}

/**
 * Opens a database file read-only. With no `-wal` file beside it nobody has
 * it open (SQLite removes the WAL when its last connection closes), so it is
 * opened immutable: no `-wal` or `-shm` file is created. Otherwise another
 * process may be writing, and the ordinary read-only mode takes part in its
 * locking and reads what its WAL holds.
 */
export function openReadOnly(path: string): Database {
  const sqlite = existsSync(`${path}-wal`)
    ? new Database(path, { readonly: true, strict: true })
    : new Database(`${pathToFileURL(path).href}?immutable=1`, constants.SQLITE_OPEN_READONLY | constants.SQLITE_OPEN_URI);
  sqlite.run(`PRAGMA busy_timeout = ${READ_BUSY_TIMEOUT_MS}`);
  return sqlite;
}

export function inspectDatabase(sqlite: Database): DbState {
  const names = sqlite
    .query<{ name: string }, []>("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
    .all()
    .map((r) => r.name);
  const applied = names.includes(MIGRATIONS_TABLE)
    ? sqlite
        .query<{ hash: string; created_at: number | string }, []>(`SELECT hash, created_at FROM "${MIGRATIONS_TABLE}" ORDER BY created_at`)
        .all()
        .map((r) => ({ hash: r.hash, createdAt: Number(r.created_at) }))
    : undefined;
  const userVersion = sqlite.query<{ user_version: number }, []>("PRAGMA user_version").get()?.user_version ?? 0;
  return { tables: names.filter((n) => n !== MIGRATIONS_TABLE), applied, recorded: decodeVersion(userVersion) };
}

/** The state of the database at `path`, read and closed again. */
export function readDatabaseState(path: string): DbState {
  const sqlite = openReadOnly(path);
  try {
    return inspectDatabase(sqlite);
  } finally {
    sqlite.close();
  }
}
