/**
 * The PostgreSQL tables (src/db/schema-pg.ts) are the SQLite ones
 * (src/db/schema.ts) in another dialect: the same query code runs on both,
 * so names, keys, nullability, defaults, indexes, foreign keys and the JS
 * types of the columns must agree. Each table is described in an
 * engine-neutral form from drizzle's own introspection (getTableConfig),
 * and the two descriptions must be equal. Then the PostgreSQL migrations:
 * the embedded list matches drizzle-kit's journal, and the last snapshot is
 * the schema as it is now (an edit of schema-pg.ts without a migration fails).
 */
import { describe, expect, test } from "bun:test";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { Column, getTableColumns, getTableName, is, sql, SQL, StringChunk, type Table } from "drizzle-orm";
import * as pgCore from "drizzle-orm/pg-core";
import * as sqliteCore from "drizzle-orm/sqlite-core";
import { generateDrizzleJson } from "drizzle-kit/api";
import * as lite from "../../src/db/schema.ts";
import * as pg from "../../src/db/schema-pg.ts";
import { migrations as pgMigrations } from "../../src/db/migrations-pg.ts";

const root = join(import.meta.dir, "..", "..");
const pgDir = join(root, "drizzle", "postgres");

/** The JS-facing kind of a column: what a query reads and writes, whichever engine stores it. */
const SQLITE_KINDS: Record<string, string> = { SQLiteText: "text", SQLiteInteger: "integer", SQLiteBoolean: "boolean" };
// integer, and bigint in number mode, are JS numbers; serial too (an id). Bigint in bigint mode is not: it is left unmapped.
const PG_KINDS: Record<string, string> = { PgText: "text", PgInteger: "integer", PgBigInt53: "integer", PgSerial: "integer", PgBoolean: "boolean" };
const kind = (map: Record<string, string>, columnType: string) => map[columnType] ?? `unmapped ${columnType}`;

/** An SQL expression as text, columns by their database names: lower(${t.username}) is `lower("username")` in either dialect. */
function render(chunk: unknown): string {
  if (is(chunk, SQL)) return chunk.queryChunks.map(render).join("");
  if (is(chunk, StringChunk)) return chunk.value.join("");
  if (is(chunk, Column)) return `"${chunk.name}"`;
  if (typeof chunk === "object" && chunk !== null && "name" in chunk) return `"${String(chunk.name)}"`; // pg's IndexedColumn
  return JSON.stringify(chunk);
}

/** A default as something both engines can be compared on: the value, or an SQL expression's text. */
const defaultOf = (value: unknown) => (value === undefined ? undefined : is(value, SQL) ? { sql: render(value) } : { value });

type AnyColumn = Column & Record<string, unknown>;

function describeColumns(table: Table, kinds: Record<string, string>, generatedId: (c: AnyColumn) => boolean) {
  return Object.entries(getTableColumns(table)).map(([key, c]) => {
    const col = c as AnyColumn;
    return {
      key,
      name: col.name,
      kind: kind(kinds, col.columnType),
      dataType: col.dataType,
      notNull: col.notNull,
      hasDefault: col.hasDefault,
      default: defaultOf(col.default),
      defaultFn: typeof col.defaultFn,
      onUpdateFn: typeof col.onUpdateFn,
      generated: col.generated === undefined ? undefined : render((col.generated as { as: unknown }).as),
      generatedId: generatedId(col),
      primary: col.primary,
      isUnique: col.isUnique,
      enumValues: col.enumValues,
    };
  });
}

interface IndexLike {
  config: { name: string; unique: boolean; columns: unknown[]; where?: SQL };
}
interface ForeignKeyLike {
  reference: () => { columns: Column[]; foreignTable: Table; foreignColumns: Column[] };
  onDelete?: string;
  onUpdate?: string;
  getName(): string;
}
interface PrimaryKeyLike {
  columns: Column[];
  getName(): string;
}
interface UniqueLike {
  columns: Column[];
  getName(): string | undefined;
}

/** Table-level parts, which both dialects' getTableConfig return in the same shape. */
function describeConstraints(config: {
  name: string;
  indexes: IndexLike[];
  foreignKeys: ForeignKeyLike[];
  primaryKeys: PrimaryKeyLike[];
  uniqueConstraints: UniqueLike[];
  checks: { name: string }[];
}) {
  const byName = <T extends { name: string }>(xs: T[]) => xs.sort((a, b) => a.name.localeCompare(b.name));
  return {
    name: config.name,
    indexes: byName(
      config.indexes.map((i) => ({
        name: i.config.name,
        unique: i.config.unique,
        on: i.config.columns.map(render),
        where: i.config.where === undefined ? undefined : render(i.config.where),
      })),
    ),
    foreignKeys: byName(
      config.foreignKeys.map((fk) => {
        const ref = fk.reference();
        return {
          name: fk.getName(),
          columns: ref.columns.map((c) => c.name),
          foreignTable: getTableName(ref.foreignTable),
          foreignColumns: ref.foreignColumns.map((c) => c.name),
          // SQLite leaves an action unset, PostgreSQL writes its default: both mean "no action"
          onDelete: fk.onDelete ?? "no action",
          onUpdate: fk.onUpdate ?? "no action",
        };
      }),
    ),
    primaryKeys: byName(config.primaryKeys.map((pk) => ({ name: pk.getName(), columns: pk.columns.map((c) => c.name) }))),
    uniqueConstraints: byName(config.uniqueConstraints.map((u) => ({ name: u.getName() ?? "", columns: u.columns.map((c) => c.name) }))),
    checks: config.checks.map((c) => c.name).sort(),
  };
}

const describeSqlite = (table: sqliteCore.SQLiteTable) => {
  const config = sqliteCore.getTableConfig(table);
  return {
    ...describeConstraints(config as unknown as Parameters<typeof describeConstraints>[0]),
    columns: describeColumns(table, SQLITE_KINDS, (c) => c.autoIncrement === true),
  };
};

const describePg = (table: pgCore.PgTable) => {
  const config = pgCore.getTableConfig(table);
  return {
    ...describeConstraints(config as unknown as Parameters<typeof describeConstraints>[0]),
    columns: describeColumns(table, PG_KINDS, (c) => c.generatedIdentity !== undefined || c.columnType === "PgSerial"),
  };
};

/** What PostgreSQL has and SQLite has not; none of it is used, so the tables stay alike. */
const pgOnly = (table: pgCore.PgTable) => {
  const config = pgCore.getTableConfig(table);
  return {
    schema: config.schema,
    enableRLS: config.enableRLS,
    policies: config.policies.length,
    indexMethods: [...new Set(config.indexes.map((i) => i.config.method))],
    concurrently: config.indexes.some((i) => i.config.concurrently),
  };
};

const tablesOf = <T>(module: Record<string, unknown>, cls: abstract new (...args: never[]) => T) =>
  Object.fromEntries(Object.entries(module).filter(([, v]) => is(v, cls as never))) as Record<string, T>;
const liteTables = tablesOf(lite, sqliteCore.SQLiteTable);
const pgTables = tablesOf(pg, pgCore.PgTable);

describe("schema-pg.ts corresponds to schema.ts", () => {
  test("the same tables, exported under the same names", () => {
    const names = (ts: Record<string, Table>) => Object.fromEntries(Object.entries(ts).map(([k, t]) => [k, getTableName(t)]));
    expect(Object.keys(liteTables).length).toBeGreaterThan(0);
    expect(names(pgTables)).toEqual(names(liteTables));
  });

  for (const [key, liteTable] of Object.entries(liteTables)) {
    test(`${key}: columns, keys, defaults, indexes and foreign keys`, () => {
      const pgTable = pgTables[key];
      if (pgTable === undefined) throw new Error(`schema-pg.ts has no table ${key}`);
      expect(describePg(pgTable)).toEqual(describeSqlite(liteTable));
      expect(pgOnly(pgTable)).toEqual({
        schema: undefined,
        enableRLS: false,
        policies: 0,
        indexMethods: pgCore.getTableConfig(pgTable).indexes.length > 0 ? ["btree"] : [],
        concurrently: false,
      });
    });
  }

  test("the rows read and written have the same types in code", () => {
    // checked by the type checker: a column whose JS type differs makes one of these `false`
    type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
    const rows: [
      Same<typeof lite.users.$inferSelect, typeof pg.users.$inferSelect>,
      Same<typeof lite.users.$inferInsert, typeof pg.users.$inferInsert>,
      Same<typeof lite.tokens.$inferSelect, typeof pg.tokens.$inferSelect>,
      Same<typeof lite.tokens.$inferInsert, typeof pg.tokens.$inferInsert>,
      Same<typeof lite.reservedSubdomains.$inferSelect, typeof pg.reservedSubdomains.$inferSelect>,
      Same<typeof lite.reservedSubdomains.$inferInsert, typeof pg.reservedSubdomains.$inferInsert>,
      Same<typeof lite.sessions.$inferSelect, typeof pg.sessions.$inferSelect>,
      Same<typeof lite.sessions.$inferInsert, typeof pg.sessions.$inferInsert>,
      Same<typeof lite.trafficDaily.$inferSelect, typeof pg.trafficDaily.$inferSelect>,
      Same<typeof lite.trafficDaily.$inferInsert, typeof pg.trafficDaily.$inferInsert>,
      Same<typeof lite.adminKeys.$inferSelect, typeof pg.adminKeys.$inferSelect>,
      Same<typeof lite.adminKeys.$inferInsert, typeof pg.adminKeys.$inferInsert>,
      Same<typeof lite.auditLog.$inferSelect, typeof pg.auditLog.$inferSelect>,
      Same<typeof lite.auditLog.$inferInsert, typeof pg.auditLog.$inferInsert>,
      Same<lite.UserRow, pg.UserRow>,
      Same<lite.TokenRow, pg.TokenRow>,
      Same<lite.ReservedSubdomainRow, pg.ReservedSubdomainRow>,
      Same<lite.AdminKeyRow, pg.AdminKeyRow>,
      Same<lite.AuditRow, pg.AuditRow>,
    ] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
    expect(rows.every((r) => r)).toBe(true);
  });
});

describe("the comparison notices a difference", () => {
  // one SQLite table and PostgreSQL variants of it, each with one thing changed
  const base = sqliteCore.sqliteTable(
    "t",
    {
      id: sqliteCore.integer("id").primaryKey({ autoIncrement: true }),
      ownerId: sqliteCore.integer("owner_id").references(() => lite.users.id, { onDelete: "cascade" }),
      name: sqliteCore.text("name").notNull(),
      kind: sqliteCore.text("kind", { enum: ["a", "b"] }).notNull().default("a"),
      on: sqliteCore.integer("on", { mode: "boolean" }).notNull().default(true),
      bytes: sqliteCore.integer("bytes").notNull().default(0),
    },
    (t) => [sqliteCore.uniqueIndex("t_name").on(sql`lower(${t.name})`), sqliteCore.index("t_owner").on(t.ownerId)],
  );
  type Change = { column?: string; ownerDelete?: "cascade" | "set null"; nameIndex?: "lower" | "plain" | "plain-unique"; enumValues?: [string, ...string[]]; defaults?: boolean; nullName?: boolean; bytes?: "bigint" | "bigint64"; on?: "integer" };
  const variant = (c: Change = {}) =>
    pgCore.pgTable(
      "t",
      {
        id: pgCore.integer("id").primaryKey().generatedByDefaultAsIdentity(),
        ownerId: pgCore.integer("owner_id").references(() => pg.users.id, { onDelete: c.ownerDelete ?? "cascade" }),
        name: c.nullName ? pgCore.text(c.column ?? "name") : pgCore.text(c.column ?? "name").notNull(),
        kind: pgCore.text("kind", { enum: c.enumValues ?? ["a", "b"] }).notNull().default(c.defaults === false ? "b" : "a"),
        on: c.on === "integer" ? pgCore.integer("on").notNull().default(1) : pgCore.boolean("on").notNull().default(true),
        bytes:
          c.bytes === "bigint64"
            ? pgCore.bigint("bytes", { mode: "bigint" }).notNull().default(0n)
            : pgCore.bigint("bytes", { mode: "number" }).notNull().default(0),
      },
      (t) => [
        c.nameIndex === "plain"
          ? pgCore.index("t_name").on(t.name)
          : c.nameIndex === "plain-unique"
            ? pgCore.uniqueIndex("t_name").on(t.name)
            : pgCore.uniqueIndex("t_name").on(sql`lower(${t.name})`),
        pgCore.index("t_owner").on(t.ownerId),
      ],
    );

  test("the unchanged variant is equal, so the differences below are what fails", () => {
    expect(describePg(variant())).toEqual(describeSqlite(base));
  });

  const changes: [string, Change][] = [
    ["a renamed column", { column: "title" }],
    ["nullability", { nullName: true }],
    ["a default", { defaults: false }],
    ["enum values", { enumValues: ["a", "b", "c"] }],
    ["a foreign key's onDelete", { ownerDelete: "set null" }],
    ["an index that is not unique", { nameIndex: "plain" }],
    ["an index on the column, not on lower() of it", { nameIndex: "plain-unique" }],
    ["a boolean kept as an integer", { on: "integer" }],
    ["a bigint read as a JS bigint", { bytes: "bigint64" }],
  ];
  for (const [what, change] of changes) {
    test(what, () => {
      expect(describePg(variant(change))).not.toEqual(describeSqlite(base));
    });
  }
});

describe("PostgreSQL migrations", () => {
  const journal = (async () =>
    (await Bun.file(join(pgDir, "meta", "_journal.json")).json()) as {
      dialect: string;
      entries: { idx: number; when: number; tag: string; breakpoints: boolean }[];
    })();

  test("src/db/migrations-pg.ts embeds drizzle/postgres's migrations in journal order (run npm run db:generate)", async () => {
    const { dialect, entries } = await journal;
    expect(dialect).toBe("postgresql");
    expect(entries.length).toBeGreaterThan(0);
    expect(pgMigrations.map(({ tag, when, breakpoints }) => ({ tag, when, breakpoints }))).toEqual(
      entries.map(({ tag, when, breakpoints }) => ({ tag, when, breakpoints })),
    );
    for (const m of pgMigrations) expect(m.sql).toBe(await Bun.file(join(pgDir, `${m.tag}.sql`)).text());
    // no SQL file drizzle-kit wrote that the journal (and so the executable) leaves out
    const files = readdirSync(pgDir).filter((f) => f.endsWith(".sql")).sort();
    expect(files).toEqual(entries.map((e) => `${e.tag}.sql`).sort());
  });

  test("the last snapshot is schema-pg.ts as it is: every change has its migration (run npm run db:generate)", async () => {
    const { entries } = await journal;
    const snapshots = readdirSync(join(pgDir, "meta")).filter((f) => f.endsWith("_snapshot.json")).sort();
    expect(snapshots.length).toBe(entries.length);
    const last = entries.at(-1)!;
    const lastFile = snapshots.at(-1)!;
    expect(lastFile).toBe(`${String(last.idx).padStart(4, "0")}_snapshot.json`);
    const snapshot = (await Bun.file(join(pgDir, "meta", lastFile)).json()) as {
      tables: Record<string, { name: string; columns: Record<string, { name: string; type: string; notNull: boolean; primaryKey: boolean }> }>;
      [part: string]: unknown;
    };

    // the tables and columns, read straight from schema-pg.ts
    const fromSchema = Object.fromEntries(
      Object.values(pgTables).map((t) => [
        getTableName(t),
        Object.fromEntries(
          pgCore.getTableConfig(t).columns.map((c) => [c.name, { type: c.getSQLType(), notNull: c.notNull, primaryKey: c.primary }]),
        ),
      ]),
    );
    const fromSnapshot = Object.fromEntries(
      Object.values(snapshot.tables).map((t) => [
        t.name,
        Object.fromEntries(Object.values(t.columns).map((c) => [c.name, { type: c.type, notNull: c.notNull, primaryKey: c.primaryKey }])),
      ]),
    );
    expect(fromSnapshot).toEqual(fromSchema);

    // and everything else drizzle-kit would diff (defaults, identities, indexes, keys), with drizzle-kit's own serializer
    const current = generateDrizzleJson(pg) as unknown as Record<string, unknown>;
    for (const part of ["tables", "enums", "schemas", "sequences", "roles", "policies", "views"]) {
      expect({ [part]: current[part] }).toEqual({ [part]: snapshot[part] });
    }
  });
});
