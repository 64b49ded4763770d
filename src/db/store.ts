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
import { sql, type SQL } from "drizzle-orm";
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
  /**
   * Inside a transaction: waits until no other transaction holds `name`, and
   * holds it until this one ends. For rules that read before they write
   * across rows (the last enabled admin): PostgreSQL's transactions do not
   * see each other's uncommitted writes, SQLite's do not run at once.
   */
  lock(name: string): Promise<void>;
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
    // one transaction at a time already: nothing else to wait for
    async lock() {},
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
      return (await run(q)) as R[];
    },
    async get<R>(q: Query<R>) {
      return ((await run(q)) as R[])[0];
    },
    async run(q) {
      await run(q);
    },
    async lock(name) {
      const tx = transactionDb.getStore();
      if (!tx) throw new Error(`lock('${name}') outside a transaction`);
      await run(tx.execute(sql`SELECT pg_advisory_xact_lock(hashtext(${name}))`));
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
  execute(query: SQL): PromiseLike<unknown>;
}

/**
 * Runs a PostgreSQL query. drizzle wraps the server's error in one whose
 * message carries the query's parameters (a password hash, a token's
 * digest): what goes on is the server's own error, without them.
 */
async function run(q: PromiseLike<unknown>): Promise<unknown> {
  try {
    return await q;
  } catch (err) {
    const cause = (err as { cause?: unknown }).cause;
    throw cause instanceof Error && /^Failed query/.test((err as Error).message) ? cause : err;
  }
}
