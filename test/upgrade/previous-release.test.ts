/**
 * A database the previous release migrated (every migration but the newest)
 * takes the newest at the next start, on SQLite and on PostgreSQL, and ends
 * with the very schema a fresh database gets. Migrations written side by side
 * are numbered again when they meet; this holds that the one numbered last
 * also comes last in drizzle's bookkeeping (applied by `when`), so an
 * upgrade neither skips it nor takes the database for a newer burrow's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { migrations } from "../../src/db/migrations.ts";
import { migrations as pgMigrations } from "../../src/db/migrations-pg.ts";
import { DB_FILE, openDatabase } from "../../src/db/open.ts";
import { openPostgres } from "../../src/db/open-postgres.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";

const dirs: string[] = [];
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});
const dataDir = () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-previous-"));
  dirs.push(dir);
  return dir;
};

test("the migrations of each dialect come in journal order by when, as drizzle applies them", () => {
  for (const set of [migrations, pgMigrations]) {
    for (let i = 1; i < set.length; i++) expect(set[i]!.when).toBeGreaterThan(set[i - 1]!.when);
  }
});

/** Tables, indexes and their SQL, as SQLite keeps them. */
const sqliteSchema = (dir: string) => {
  const sqlite = new Database(join(dir, DB_FILE), { readonly: true });
  try {
    return sqlite.query("SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name").all();
  } finally {
    sqlite.close();
  }
};

test("SQLite: a database of the previous release takes the newest migration and has a fresh database's schema", () => {
  const previous = dataDir();
  openDatabase(previous, { migrations: migrations.slice(0, -1), version: "0.1.0" }).close();
  const upgraded = openDatabase(previous);
  const applied = upgraded.sqlite.query<{ n: number }, []>("SELECT count(*) AS n FROM __drizzle_migrations").get()!.n;
  upgraded.close();
  expect(applied).toBe(migrations.length);
  const fresh = dataDir();
  openDatabase(fresh).close();
  expect(sqliteSchema(previous)).toEqual(sqliteSchema(fresh));
});

describe("PostgreSQL", () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await startPostgres();
  });
  afterAll(async () => {
    await pg?.stop();
  });

  /** Columns and indexes of the public schema. */
  async function pgSchema(url: string) {
    const sql = new SQL(url);
    try {
      const columns = await sql`SELECT table_name, column_name, data_type, is_nullable, column_default FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, column_name`;
      const indexes = await sql`SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY tablename, indexname`;
      return { columns: [...columns], indexes: [...indexes] };
    } finally {
      await sql.close();
    }
  }

  test("a database of the previous release takes the newest migration and has a fresh database's schema", async () => {
    const previous = await pg.newDatabase();
    await (await openPostgres(previous, { migrations: pgMigrations.slice(0, -1) })).close();
    const upgraded = await openPostgres(previous);
    const [row] = await upgraded.client`SELECT count(*)::int AS n FROM __drizzle_migrations`;
    await upgraded.close();
    expect(row.n).toBe(pgMigrations.length);
    const fresh = await pg.newDatabase();
    await (await openPostgres(fresh)).close();
    expect(await pgSchema(previous)).toEqual(await pgSchema(fresh));
  });
});
