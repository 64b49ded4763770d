/**
 * Each schema file and its migrations, for both engines: the embedded list
 * (src/db/migrations.ts, migrations-pg.ts) is drizzle-kit's journal with the
 * same SQL, and the last snapshot is the schema as it is now, so an edit of
 * schema.ts or schema-pg.ts without its migration fails here (run
 * npm run db:generate).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { getTableName, is } from "drizzle-orm";
import * as pgCore from "drizzle-orm/pg-core";
import * as sqliteCore from "drizzle-orm/sqlite-core";
import { generateDrizzleJson, generateSQLiteDrizzleJson } from "drizzle-kit/api";
import * as lite from "../../src/db/schema.ts";
import * as pg from "../../src/db/schema-pg.ts";
import { migrations as liteMigrations, type EmbeddedMigration } from "../../src/db/migrations.ts";
import { migrations as pgMigrations } from "../../src/db/migrations-pg.ts";

const root = join(import.meta.dir, "..", "..");

/** A column as the snapshot records it and as the schema file declares it. */
type ColumnFacts = { type: string; notNull: boolean; primaryKey: boolean };
interface Dialect {
  name: string;
  schemaFile: string;
  dir: string;
  embedded: EmbeddedMigration[];
  /** Every table's columns, read straight from the schema file. */
  columns: () => Record<string, Record<string, ColumnFacts>>;
  /** drizzle-kit's own serialisation of the schema file, as it diffs it against the last snapshot. */
  serialise: () => Promise<Record<string, unknown>>;
  /** The parts of a snapshot drizzle-kit compares. */
  parts: string[];
}

const tablesOf = <T>(module: Record<string, unknown>, cls: abstract new (...args: never[]) => T) => Object.values(module).filter((v) => is(v, cls as never)) as T[];
const columnsOf = (columns: { name: string; notNull: boolean; primary: boolean; getSQLType(): string }[]) =>
  Object.fromEntries(columns.map((c) => [c.name, { type: c.getSQLType(), notNull: c.notNull, primaryKey: c.primary }]));

const dialects: Dialect[] = [
  {
    name: "sqlite",
    schemaFile: "schema.ts",
    dir: join(root, "drizzle"),
    embedded: liteMigrations,
    columns: () => Object.fromEntries(tablesOf(lite, sqliteCore.SQLiteTable).map((t) => [getTableName(t), columnsOf(sqliteCore.getTableConfig(t).columns)])),
    serialise: async () => (await generateSQLiteDrizzleJson(lite)) as unknown as Record<string, unknown>,
    parts: ["tables", "enums", "views", "internal"],
  },
  {
    name: "postgresql",
    schemaFile: "schema-pg.ts",
    dir: join(root, "drizzle", "postgres"),
    embedded: pgMigrations,
    columns: () => Object.fromEntries(tablesOf(pg, pgCore.PgTable).map((t) => [getTableName(t), columnsOf(pgCore.getTableConfig(t).columns)])),
    serialise: async () => generateDrizzleJson(pg) as unknown as Record<string, unknown>,
    parts: ["tables", "enums", "schemas", "sequences", "roles", "policies", "views"],
  },
];

for (const d of dialects) {
  describe(`${d.name} migrations`, () => {
    const journal = (async () =>
      (await Bun.file(join(d.dir, "meta", "_journal.json")).json()) as {
        dialect: string;
        entries: { idx: number; when: number; tag: string; breakpoints: boolean }[];
      })();

    test("the program embeds drizzle-kit's migrations in journal order (run npm run db:generate)", async () => {
      const { dialect, entries } = await journal;
      expect(dialect).toBe(d.name);
      expect(entries.length).toBeGreaterThan(0);
      expect(d.embedded.map(({ tag, when, breakpoints }) => ({ tag, when, breakpoints }))).toEqual(entries.map(({ tag, when, breakpoints }) => ({ tag, when, breakpoints })));
      for (const m of d.embedded) expect(m.sql).toBe(await Bun.file(join(d.dir, `${m.tag}.sql`)).text());
      // no SQL file drizzle-kit wrote that the journal (and so the executable) leaves out
      const files = readdirSync(d.dir).filter((f) => f.endsWith(".sql")).sort();
      expect(files).toEqual(entries.map((e) => `${e.tag}.sql`).sort());
    });

    test(`the last snapshot is ${d.schemaFile} as it is: every change has its migration (run npm run db:generate)`, async () => {
      const { entries } = await journal;
      const snapshots = readdirSync(join(d.dir, "meta")).filter((f) => f.endsWith("_snapshot.json")).sort();
      expect(snapshots.length).toBe(entries.length);
      const last = entries.at(-1)!;
      const lastFile = snapshots.at(-1)!;
      expect(lastFile).toBe(`${String(last.idx).padStart(4, "0")}_snapshot.json`);
      const snapshot = (await Bun.file(join(d.dir, "meta", lastFile)).json()) as {
        tables: Record<string, { name: string; columns: Record<string, { name: string } & ColumnFacts> }>;
        [part: string]: unknown;
      };

      // the tables and columns first, for a message that names the column
      const fromSnapshot = Object.fromEntries(
        Object.values(snapshot.tables).map((t) => [
          t.name,
          Object.fromEntries(Object.values(t.columns).map((c) => [c.name, { type: c.type, notNull: c.notNull, primaryKey: c.primaryKey }])),
        ]),
      );
      expect(fromSnapshot).toEqual(d.columns());

      // then everything else drizzle-kit would diff (defaults, identities, indexes, keys), with drizzle-kit's own serializer
      const current = await d.serialise();
      for (const part of d.parts) expect({ [part]: current[part] }).toEqual({ [part]: snapshot[part] });
    });
  });
}
