/**
 * `burrow server backup FILE`: a consistent copy of the data dir's burrow.db
 * in FILE, made while a server runs on it or not (copy.ts: VACUUM INTO, so
 * neither is in the way of the other and memory stays small). FILE must not
 * exist: a backup never overwrites anything, a previous backup least of all.
 */
import { Database } from "bun:sqlite";
import { existsSync } from "node:fs";
import { join, resolve } from "node:path";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { SERVER_FLAGS } from "../config/server-flags.ts";
import { UsageError } from "../usage-error.ts";
import { copyDatabase, CopyError } from "../db/copy.ts";
import { READ_BUSY_TIMEOUT_MS } from "../db/inspect.ts";
import { DB_FILE } from "../db/open.ts";
import { helpText, type CommandDoc } from "./usage.ts";

/** The server's --data-dir: the same default, the same variable. */
const BACKUP_FLAGS = { "data-dir": { ...SERVER_FLAGS["data-dir"], help: "the server's data dir" } } as const satisfies FlagTable;

export const BACKUP_DOC: CommandDoc = {
  name: "server backup",
  usage: ["burrow server backup FILE [--data-dir DIR]"],
  about: `Writes a consistent copy of DIR/burrow.db to FILE, whether a server is running
on DIR or not: the copy is a snapshot of one moment (SQLite's VACUUM INTO),
made without stopping anything. FILE must not exist: nothing is overwritten.
The copy appears under its name only once whole.

To restore: stop the server, copy FILE to DIR/burrow.db, remove
DIR/burrow.db-wal and DIR/burrow.db-shm, start the server.`,
  flags: BACKUP_FLAGS,
};

export async function serverBackupCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, BACKUP_FLAGS);
  if (values.help) {
    process.stdout.write(helpText(BACKUP_DOC));
    return 0;
  }
  if (positionals.length === 0) throw new UsageError("server backup needs FILE, where to write the copy (see burrow server backup --help)");
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}' (put quotes around a FILE with spaces)`);
  const dataDir = (values["data-dir"] as string | undefined) || BACKUP_FLAGS["data-dir"].default;
  const source = join(dataDir, DB_FILE);
  const target = resolve(positionals[0]!);
  if (!existsSync(source)) return fail(`no database at ${source} (is --data-dir or BURROW_DATA_DIR the server's?)`);

  let sqlite: Database;
  try {
    sqlite = openForCopy(source);
  } catch (err) {
    return fail(`cannot open ${source}: ${(err as Error).message}`);
  }
  try {
    const bytes = copyDatabase(sqlite, target);
    console.log(`backed up ${source} to ${target} (${bytes} bytes)`);
    return 0;
  } catch (err) {
    if (err instanceof CopyError) return fail(err.message);
    throw err;
  } finally {
    sqlite.close();
  }
}

/**
 * Read-write but never create: a connection that is the last one to close
 * removes the -wal and -shm files it made, which a read-only one cannot, so
 * a backup of a stopped server leaves its data dir as it found it. Where
 * the file may only be read (another user's data dir), read-only does.
 */
function openForCopy(path: string): Database {
  try {
    return checked(new Database(path, { readwrite: true, strict: true }));
  } catch {
    return checked(new Database(path, { readonly: true, strict: true }));
  }
}

/** "not a database" and permission faults show here, not in the middle of the copy. */
function checked(sqlite: Database): Database {
  try {
    sqlite.run(`PRAGMA busy_timeout = ${READ_BUSY_TIMEOUT_MS}`);
    sqlite.run("SELECT count(*) FROM sqlite_master");
    return sqlite;
  } catch (err) {
    sqlite.close();
    throw err;
  }
}

function fail(message: string): number {
  console.error(`burrow: cannot back up: ${message}`);
  return 1;
}
