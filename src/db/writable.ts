/**
 * Whether the database can take a write now (GET /readyz). A read, or a
 * write rolled back, proves nothing: SQLite touches the disk only when a
 * transaction commits. So the probe does three cheap things that fail the
 * way the server's own writes would:
 *
 * 1. the database file is writable (a chmod'ed file: the open connection
 *    still writes through its descriptor, but the next start would not);
 * 2. the data dir takes a new 4 KiB file, written and removed: a full disk or
 *    a read-only mount fails here even while SQLite's WAL still has room in
 *    blocks it had before;
 * 3. a committed write on the server's own connection: `user_version` (the
 *    version record, db/version-record.ts) rewritten with the value it has,
 *    in one IMMEDIATE transaction, so nothing changes but a page goes to the
 *    WAL. Another process holding the write lock makes it fail after a short
 *    wait rather than stall the server for the usual busy timeout.
 *
 * Nothing of it is a schema change, and the data stay as they were.
 */
import type { Database } from "bun:sqlite";
import { accessSync, constants, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { DB_FILE } from "./open.ts";

/** Left in the data dir only if the process dies between the write and the removal. */
export const PROBE_FILE = ".write-probe";
const PROBE_BYTES = new Uint8Array(4096);
/** The probe's wait for another connection's write lock, ms. */
const PROBE_BUSY_TIMEOUT_MS = 200;

/** undefined: writable; otherwise why not (an error code such as ENOSPC, EACCES or SQLITE_READONLY, and its message). */
export function unwritableReason(sqlite: Database, dataDir: string): string | undefined {
  try {
    accessSync(join(dataDir, DB_FILE), constants.W_OK);
    const probe = join(dataDir, PROBE_FILE);
    try {
      writeFileSync(probe, PROBE_BYTES, { mode: 0o600 });
    } finally {
      try {
        rmSync(probe, { force: true });
      } catch {}
    }
    committedWrite(sqlite);
    return undefined;
  } catch (err) {
    const code = (err as { code?: string }).code;
    const message = err instanceof Error ? err.message : String(err);
    return code && !message.includes(code) ? `${code}: ${message}` : message;
  }
}

function committedWrite(sqlite: Database): void {
  const busy = sqlite.query<{ timeout: number }, []>("PRAGMA busy_timeout").get()?.timeout ?? 0;
  sqlite.run(`PRAGMA busy_timeout = ${PROBE_BUSY_TIMEOUT_MS}`);
  try {
    sqlite
      .transaction(() => {
        const version = sqlite.query<{ user_version: number }, []>("PRAGMA user_version").get()?.user_version ?? 0;
        sqlite.run(`PRAGMA user_version = ${Math.trunc(version)}`);
      })
      .immediate();
  } finally {
    sqlite.run(`PRAGMA busy_timeout = ${busy}`);
  }
}
