/**
 * Consistent copies of a live database, with `VACUUM INTO`: SQLite writes
 * the copy from one read transaction, so it is a snapshot even while other
 * connections (another process included) write, WAL mode or not, and it goes
 * page by page through the page cache, never holding the database in memory.
 * The copy is a standalone file (rollback journal, no -wal beside it).
 *
 * A copy is first written under a temporary name beside its target and
 * appears under its real name only when whole and synced: an interrupted
 * copy never passes for a backup. It never replaces an existing file.
 */
import type { Database } from "bun:sqlite";
import { chmodSync, existsSync, linkSync, readdirSync, renameSync, statSync, unlinkSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { syncDirectory, syncFile } from "../durable.ts";

/** Marks the name a copy has while it is written, for sweepStaleCopies to recognise. */
const PARTIAL = ".partial-";
let partialCount = 0;

/** A fresh temporary name beside `target`. */
export const partialPath = (target: string) =>
  join(dirname(target), `${basename(target)}${PARTIAL}${process.pid}-${Date.now().toString(36)}-${++partialCount}`);

/** VACUUM INTO `path`, which must not exist: the snapshot, unsynced and under whatever name it is given. */
export function snapshot(sqlite: Database, path: string): void {
  sqlite.run("VACUUM INTO ?", [path]);
}

export class CopyError extends Error {
  override name = "CopyError";
  constructor(
    readonly code: "TARGET_EXISTS" | "NO_DIRECTORY" | "COPY_FAILED",
    message: string,
  ) {
    super(message);
  }
}

/** Writes a consistent copy of `sqlite`'s main database to `target`; returns its size in bytes. */
export function copyDatabase(sqlite: Database, target: string): number {
  const dir = dirname(target);
  if (!existsSync(dir) || !statSync(dir).isDirectory()) throw new CopyError("NO_DIRECTORY", `no such directory: ${dir}`);
  if (existsSync(target)) throw new CopyError("TARGET_EXISTS", `${target} already exists; it is never overwritten (choose another name, or move it away first)`);
  const partial = partialPath(target);
  try {
    snapshot(sqlite, partial);
    chmodSync(partial, 0o600); // it holds password and token hashes, wherever it is written
    syncFile(partial); // SQLite does not sync what VACUUM INTO writes: a backup a power cut can tear is no backup
    publish(partial, target);
    syncDirectory(dir);
    return statSync(target).size;
  } catch (err) {
    if (err instanceof CopyError) throw err;
    throw new CopyError("COPY_FAILED", `cannot write ${target}: ${(err as Error).message}`);
  } finally {
    removeQuietly(partial);
  }
}

/**
 * Gives the whole copy its name. A hard link fails if the name was taken
 * meanwhile, so a file someone else just made there is never replaced;
 * where links are not supported the rename after a last check is nearly so.
 */
function publish(partial: string, target: string): void {
  try {
    linkSync(partial, target);
  } catch (err) {
    const code = (err as { code?: string }).code;
    if (code === "EEXIST") throw new CopyError("TARGET_EXISTS", `${target} already exists; it is never overwritten (choose another name, or move it away first)`);
    if (code !== "EPERM" && code !== "ENOTSUP" && code !== "EOPNOTSUPP" && code !== "ENOSYS") throw err;
    if (existsSync(target)) throw new CopyError("TARGET_EXISTS", `${target} already exists; it is never overwritten`);
    renameSync(partial, target);
  }
}

function removeQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone (published by rename, or never written)
  }
}

/** Copies a process died writing (in `dir`, of `name`), left alone while younger than `olderThanMs`: someone may be writing them. */
export function sweepStaleCopies(dir: string, name: string, olderThanMs: number, now = Date.now()): void {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return;
  }
  for (const entry of entries) {
    if (!entry.startsWith(name) || !entry.includes(PARTIAL)) continue;
    const path = join(dir, entry);
    try {
      if (now - statSync(path).mtimeMs > olderThanMs) unlinkSync(path);
    } catch {
      // gone meanwhile
    }
  }
}
