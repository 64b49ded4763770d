/**
 * The one way core reaches the database, whichever engine holds it: SQLite
 * (bun:sqlite, the embedded default) or PostgreSQL (Bun's SQL client, for
 * several nodes). Core builds its queries with drizzle from `store.db` and
 * `store.tables` and runs them here; the query code is the same for both,
 * because the two schemas have the same tables, columns and property names
 * (test/db/schema-correspondence.test.ts holds them together).
 *
 * Everything is async, as PostgreSQL is. A transaction is
 * `store.transaction(async () => ...)`: inside it, `store.db` is the
 * transaction's, so every query built there is part of it, however deep in
 * core the code that builds it is.
 *
 * SQLite has one connection and its statements run synchronously, so a
 * transaction is BEGIN IMMEDIATE .. COMMIT on that connection, and while one
 * is open every statement from outside it waits its turn: otherwise another
 * request's write, run between two of the transaction's awaits, would land in
 * it (and be rolled back with it).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Database } from "bun:sqlite";
import type { BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import type * as schema from "./schema.ts";

export type Dialect = "sqlite" | "postgres";

/**
 * drizzle's query builder, typed as SQLite's. PostgreSQL's builder has the
 * same methods for everything core uses (select/insert/update/delete, where,
 * joins, groupBy, having, orderBy, limit, returning, onConflictDoUpdate);
 * what differs is how a query runs, which is the Store's job.
 */
export type Db = BunSQLiteDatabase<typeof schema>;
export type Tables = typeof schema;

/** A query as core hands it over: SQLite's builders run with these, PostgreSQL's are awaited. */
export interface Query<R> extends PromiseLike<unknown> {
  all(): R[];
  get(): R | undefined;
}
export interface Statement extends PromiseLike<unknown> {
  run(): unknown;
}

export interface Store {
  readonly dialect: Dialect;
  /** The query builder: the open transaction's inside `transaction`, else the database's. */
  readonly db: Db;
  readonly tables: Tables;
  /** Every row. */
  all<R>(q: Query<R>): Promise<R[]>;
  /** The first row, or undefined. */
  get<R>(q: Query<R>): Promise<R | undefined>;
  /** Runs a statement for its effect. */
  run(q: Statement): Promise<void>;
  /**
   * Runs `fn` in one transaction: committed when it resolves, rolled back
   * when it throws. A transaction inside a transaction is part of the outer
   * one.
   */
  transaction<T>(fn: () => Promise<T>): Promise<T>;
}

/** SQLite: one connection, statements run at once unless a transaction is open elsewhere. */
export function sqliteStore(sqlite: Database, db: Db, tables: Tables): Store {
  const inTransaction = new AsyncLocalStorage<true>();
  /** Resolves when the open transaction ends; undefined when none is open. */
  let open: Promise<void> | undefined;

  /** Waits while a transaction that is not the caller's is open. */
  async function turn(): Promise<void> {
    while (open && !inTransaction.getStore()) await open;
  }

  return {
    dialect: "sqlite",
    db,
    tables,
    async all(q) {
      if (open) await turn();
      return q.all();
    },
    async get(q) {
      if (open) await turn();
      return q.get();
    },
    async run(q) {
      if (open) await turn();
      q.run();
    },
    async transaction(fn) {
      if (inTransaction.getStore()) return fn();
      await turn();
      let end!: () => void;
      open = new Promise((resolve) => (end = resolve));
      try {
        // IMMEDIATE takes the write lock first, so another process's writer cannot slip in between a read and a write
        sqlite.run("BEGIN IMMEDIATE");
        try {
          const result = await inTransaction.run(true, fn);
          sqlite.run("COMMIT");
          return result;
        } catch (err) {
          if (sqlite.inTransaction) sqlite.run("ROLLBACK");
          throw err;
        }
      } finally {
        open = undefined;
        end();
      }
    },
  };
}

/**
 * PostgreSQL: a pool of connections; a transaction holds one of them, and
 * queries built inside it (through `db`) run on it.
 */
export function postgresStore(base: PostgresDb, tables: Tables): Store {
  const transactionDb = new AsyncLocalStorage<PostgresDb>();
  return {
    dialect: "postgres",
    get db() {
      return (transactionDb.getStore() ?? base) as unknown as Db;
    },
    tables,
    async all<R>(q: Query<R>) {
      return (await q) as R[];
    },
    async get<R>(q: Query<R>) {
      return ((await q) as R[])[0];
    },
    async run(q) {
      await q;
    },
    async transaction(fn) {
      if (transactionDb.getStore()) return fn();
      return base.transaction((tx) => transactionDb.run(tx as unknown as PostgresDb, fn));
    },
  };
}

/** What postgresStore needs of drizzle's PostgreSQL database. */
export interface PostgresDb {
  transaction<T>(fn: (tx: unknown) => Promise<T>): Promise<T>;
}
