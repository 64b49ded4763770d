/**
 * The server's database, whichever engine: SQLite in the data dir (the
 * default), or PostgreSQL with --database (several nodes share it). What
 * differs between them beyond the queries (the Store) is here: the
 * readiness probe, the backup endpoint (SQLite only: PostgreSQL has
 * pg_dump), what the log says of where the data is, and closing.
 */
import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import { openDatabase } from "./open.ts";
import { openPostgres } from "./open-postgres.ts";
import type { Store } from "./store.ts";
import { unwritableReason } from "./writable.ts";

export interface ServerDatabase {
  store: Store;
  /** For the log: a file path, or host:port/database (never a password). */
  where: string;
  /** undefined when the database takes writes now; otherwise why not (GET /readyz). */
  unwritable(): string | undefined | Promise<string | undefined>;
  /** What POST /api/backup copies; undefined on PostgreSQL. */
  backup?: { dataDir: string; sqlite: Database };
  /** PostgreSQL's client, for what the nodes share beyond the tables (LISTEN/NOTIFY); undefined on SQLite. */
  postgres?: SQL;
  close(): Promise<void>;
}

/** How long the readiness probe waits for PostgreSQL, ms. */
const PROBE_TIMEOUT_MS = 2_000;

/** Where the server's data lives: --data-dir, and --database / --db-pool for PostgreSQL. */
export interface DatabaseSettings {
  dataDir: string;
  /** A PostgreSQL URL; undefined: SQLite in the data dir. */
  databaseUrl?: string;
  databasePool?: number;
}

export async function openServerDatabase(config: DatabaseSettings): Promise<ServerDatabase> {
  if (config.databaseUrl === undefined) {
    const sqlite = openDatabase(config.dataDir);
    return {
      store: sqlite.store,
      where: sqlite.path,
      unwritable: () => unwritableReason(sqlite.sqlite, config.dataDir),
      backup: { dataDir: config.dataDir, sqlite: sqlite.sqlite },
      close: async () => sqlite.close(),
    };
  }
  const pg = await openPostgres(config.databaseUrl, { poolSize: config.databasePool });
  return {
    store: pg.store,
    where: pg.where,
    postgres: pg.client,
    async unwritable() {
      // a standby (read-only replica) answers queries but takes no writes
      const probe = pg.client`SELECT pg_is_in_recovery() AS standby`.then((rows) => (rows[0]?.standby ? "the database is a read-only standby" : undefined));
      const timeout = Bun.sleep(PROBE_TIMEOUT_MS).then(() => `no answer from PostgreSQL within ${PROBE_TIMEOUT_MS} ms`);
      return Promise.race([probe, timeout]);
    },
    close: () => pg.close(),
  };
}
