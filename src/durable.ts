/**
 * Making what was written survive a power cut: a file's bytes, and a new
 * name in a directory (a rename or link is only durable once its directory
 * is synced). Used by the certificate store and the database copies.
 */
import { closeSync, fsyncSync, openSync } from "node:fs";

/** Flushes a file someone else wrote (e.g. SQLite's VACUUM INTO, which does not sync). */
export function syncFile(path: string): void {
  const fd = openSync(path, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** Makes new names in `dir` durable; skipped where a directory cannot be opened (Windows). */
export function syncDirectory(dir: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(dir, "r");
    fsyncSync(fd);
  } catch {
    // not supported here: the rename is still atomic, only its durability is the OS's
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
