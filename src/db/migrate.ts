/**
 * Applies migrations embedded in the program and records this version, in
 * one transaction: a database is either wholly before or wholly after.
 *
 * The bookkeeping is drizzle's own (__drizzle_migrations: hash and journal
 * timestamp per migration, "pending" = newer than the last applied), written
 * here rather than through drizzle's migrator because that one reads a
 * drizzle/ folder (absent inside the compiled executable) and cannot put the
 * version record in its transaction.
 */
import type { Database } from "bun:sqlite";
import { MIGRATIONS_TABLE } from "./inspect.ts";
import type { Migration } from "./plan.ts";
import { encodeVersion } from "./version-record.ts";

const BREAKPOINT = "--> statement-breakpoint";

/** A migration's statements, as drizzle-kit separates them, empty ones left out. */
export const migrationStatements = (m: Migration): string[] => m.sql.split(BREAKPOINT).filter((s) => s.trim() !== "");

/** drizzle-kit's hash of a migration: SHA-256 of its SQL file's text. */
export const migrationHash = (m: Migration) => new Bun.CryptoHasher("sha256").update(m.sql).digest("hex");

export function applyMigrations(sqlite: Database, migrations: readonly Migration[], version: string): Migration[] {
  const recorded = encodeVersion(version);
  sqlite.run(`CREATE TABLE IF NOT EXISTS "${MIGRATIONS_TABLE}" (id SERIAL PRIMARY KEY, hash text NOT NULL, created_at numeric)`);
  // IMMEDIATE: a second process starting on the same database waits here, then finds nothing left to do
  sqlite.run("BEGIN IMMEDIATE");
  try {
    const last = sqlite.query<{ last: number | null }, []>(`SELECT max(created_at) AS last FROM "${MIGRATIONS_TABLE}"`).get()?.last;
    const pending = migrations.filter((m) => last === null || last === undefined || m.when > Number(last));
    for (const m of pending) {
      for (const statement of migrationStatements(m)) sqlite.run(statement);
      sqlite.run(`INSERT INTO "${MIGRATIONS_TABLE}" (hash, created_at) VALUES (?, ?)`, [migrationHash(m), m.when]);
    }
    sqlite.run(`PRAGMA user_version = ${recorded}`);
    sqlite.run("COMMIT");
    return pending;
  } catch (err) {
    sqlite.run("ROLLBACK");
    throw err;
  }
}
