/**
 * Whether a failed query says the database cannot serve now (down,
 * restarting, out of connections or disk, a read-only standby, a locked
 * SQLite file) rather than that the query or the data was wrong. Those are
 * answered as DATABASE_UNAVAILABLE (503, try again shortly) and logged as a
 * warning at most every 10 s, not as a bug with its stack trace per request.
 */
import { log, quietWarnings } from "../log.ts";

/** PostgreSQL SQLSTATE classes and codes that mean "not now" (PostgreSQL manual, appendix A). */
const PG_UNAVAILABLE_CLASSES = ["08", "53", "57P"]; // connection exception, insufficient resources, operator intervention
const PG_UNAVAILABLE_CODES = new Set(["25006"]); // read_only_sql_transaction: a standby
/** Bun.SQL's own codes for a connection that could not be made or was lost. */
const BUN_SQL_UNAVAILABLE = /^ERR_POSTGRES_(CONNECTION_|.*TIMEOUT$|TLS_)/;
const SOCKET_CODES = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "EPIPE"]);
/** bun:sqlite's codes for a file that cannot be written now. */
const SQLITE_UNAVAILABLE = /^SQLITE_(BUSY|LOCKED|FULL|IOERR|READONLY|CANTOPEN)/;

export function databaseUnavailable(err: unknown): boolean {
  if (typeof err !== "object" || err === null) return false;
  const { code, errno } = err as { code?: unknown; errno?: unknown };
  if (typeof code === "string" && (BUN_SQL_UNAVAILABLE.test(code) || SOCKET_CODES.has(code) || SQLITE_UNAVAILABLE.test(code))) return true;
  if (typeof errno === "string" && (PG_UNAVAILABLE_CODES.has(errno) || PG_UNAVAILABLE_CLASSES.some((c) => errno.startsWith(c)))) return true;
  return false;
}

/** The words a client gets for it. */
export const UNAVAILABLE_MESSAGE = "the database is unavailable: try again in a few seconds";
/** When to try again (Retry-After for the admin API, retry_after in an agent's refusal). */
export const UNAVAILABLE_RETRY_S = 5;

const warn = quietWarnings(10_000);

const listeners = new Set<(where: string) => void>();

/** Told each time the database is met unavailable (the alert that says so; webhooks/alerts.ts). Returns how to stop. */
export function onDatabaseUnavailable(listener: (where: string) => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}

/** Logs an unavailable database (where it was met, and the driver's error: no query, no parameters) at most every 10 s. */
export function reportUnavailable(where: string, err: unknown): void {
  warn("database", "database unavailable", { where, err: String(err) });
  for (const listener of listeners) listener(where);
}

/**
 * A background write that failed (an audit entry, a traffic flush): a
 * warning at most every 10 s when the database is unavailable, an error
 * line each time otherwise (a bug, or data the database refused).
 */
export function logFailedWrite(what: string, fields: Record<string, unknown>, err: unknown): void {
  if (databaseUnavailable(err)) reportUnavailable(what, err);
  else log.error(what, { ...fields, err: String(err) });
}
