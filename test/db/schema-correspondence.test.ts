/**
 * The PostgreSQL tables (src/db/schema-pg.ts) are the SQLite ones
 * (src/db/schema.ts) in another dialect: the same query code runs on both,
 * so names, keys, nullability, defaults, indexes, foreign keys and the JS
 * types of the columns must agree. Each table is described in an
 * engine-neutral form from drizzle's own introspection (getTableConfig),
 * and the two descriptions must be equal. schema-migrations.test.ts holds
 * each file to its migrations, schema-values.test.ts the columns' values to
 * the code's lists.
 */
import { describe, expect, test } from "bun:test";
import { Column, getTableColumns, getTableName, is, sql, SQL, StringChunk, type Table } from "drizzle-orm";
import * as pgCore from "drizzle-orm/pg-core";
import * as sqliteCore from "drizzle-orm/sqlite-core";
import * as lite from "../../src/db/schema.ts";
import * as pg from "../../src/db/schema-pg.ts";

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

  test("the rows read and written have the same types in code, in every table", () => {
    // checked by the type checker: a table whose rows' JS types differ is named in RowsDiffer, and "none" no longer fits it
    const differ: [RowsDiffer] extends [never] ? "none" : RowsDiffer = "none";
    const rowTypes: [
      Same<lite.UserRow, pg.UserRow>,
      Same<lite.TokenRow, pg.TokenRow>,
      Same<lite.ReservedSubdomainRow, pg.ReservedSubdomainRow>,
      Same<lite.CustomHostnameRow, pg.CustomHostnameRow>,
      Same<lite.AdminKeyRow, pg.AdminKeyRow>,
      Same<lite.AuditRow, pg.AuditRow>,
      Same<lite.DeviceCodeRow, pg.DeviceCodeRow>,
      Same<lite.InvitationRow, pg.InvitationRow>,
      Same<lite.PrivateNameRow, pg.PrivateNameRow>,
    ] = [true, true, true, true, true, true, true, true, true];
    expect(differ).toBe("none");
    expect(rowTypes.every((r) => r)).toBe(true);
  });
});

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Lite = typeof lite;
type Pg = typeof pg;
type Select<T> = T extends { $inferSelect: infer R } ? R : never;
type Insert<T> = T extends { $inferInsert: infer R } ? R : never;
type TableKey = { [K in keyof Lite]: Lite[K] extends sqliteCore.SQLiteTable ? K : never }[keyof Lite];
/** The tables whose rows differ in type between the two files, or are missing from schema-pg.ts. */
type RowsDiffer = {
  [K in TableKey]: K extends keyof Pg
    ? Same<Select<Lite[K]>, Select<Pg[K]>> extends true
      ? Same<Insert<Lite[K]>, Insert<Pg[K]>> extends true
        ? never
        : K
      : K
    : K;
}[TableKey];

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
  type Change = {
    column?: string;
    ownerDelete?: "cascade" | "set null";
    nameIndex?: "lower" | "plain" | "plain-unique";
    enumValues?: [string, ...string[]];
    defaults?: boolean;
    nullName?: boolean;
    bytes?: "bigint" | "bigint64";
    on?: "integer";
    nameType?: "integer";
    noPrimaryKey?: boolean;
    noForeignKey?: boolean;
    ownerIndex?: "on name" | "none";
    uniqueName?: "column" | "constraint";
  };
  const variant = (c: Change = {}) =>
    pgCore.pgTable(
      "t",
      {
        id: c.noPrimaryKey ? pgCore.integer("id").generatedByDefaultAsIdentity() : pgCore.integer("id").primaryKey().generatedByDefaultAsIdentity(),
        ownerId: c.noForeignKey ? pgCore.integer("owner_id") : pgCore.integer("owner_id").references(() => pg.users.id, { onDelete: c.ownerDelete ?? "cascade" }),
        name:
          c.nameType === "integer"
            ? pgCore.integer("name").notNull()
            : c.nullName
              ? pgCore.text(c.column ?? "name")
              : c.uniqueName === "column"
                ? pgCore.text(c.column ?? "name").notNull().unique()
                : pgCore.text(c.column ?? "name").notNull(),
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
        ...(c.ownerIndex === "none" ? [] : [pgCore.index("t_owner").on(c.ownerIndex === "on name" ? t.name : t.ownerId)]),
        ...(c.uniqueName === "constraint" ? [pgCore.unique("t_name_unique").on(t.name)] : []),
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
    ["a column's type (integer for text)", { nameType: "integer" }],
    ["a primary key", { noPrimaryKey: true }],
    ["a foreign key", { noForeignKey: true }],
    ["an index's column", { ownerIndex: "on name" }],
    ["a missing index", { ownerIndex: "none" }],
    ["a column's unique constraint", { uniqueName: "column" }],
    ["a table's unique constraint", { uniqueName: "constraint" }],
  ];
  for (const [what, change] of changes) {
    test(what, () => {
      expect(describePg(variant(change))).not.toEqual(describeSqlite(base));
    });
  }
});
