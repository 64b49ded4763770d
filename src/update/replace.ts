/**
 * Putting a new executable in the place of the running one without a moment
 * when there is none, and keeping the one it replaces for a rollback:
 *
 *   1. the download is written beside the executable (same folder, so the
 *      same file system) under a hidden name, and flushed to disk;
 *   2. the current executable gets a second name, <exe>.old (a hard link:
 *      the running program's file stays where it is);
 *   3. the new file is renamed over the executable: one atomic step, after
 *      which a new start runs the new version and the running one goes on;
 *   4. the folder is flushed, so the renames survive a power cut.
 *
 * On Windows a running executable cannot be replaced but may be renamed:
 * it is moved to <exe>.old first, then the new file takes its name (and it
 * is moved back if that fails).
 *
 * One update or rollback at a time: a lock file beside the executable
 * holds the pid of the one at work.
 */
import { chmodSync, chownSync, closeSync, copyFileSync, existsSync, fsyncSync, linkSync, openSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { syncDirectory } from "../durable.ts";
import { UpdateError } from "./errors.ts";

const WINDOWS = process.platform === "win32";

/** Where the replaced executable is kept: burrow.old (burrow.old.exe on Windows). */
export function previousPath(exe: string): string {
  return exe.toLowerCase().endsWith(".exe") ? `${exe.slice(0, -4)}.old.exe` : `${exe}.old`;
}

const refusedWrite = (code: string | undefined) => code === "EACCES" || code === "EPERM" || code === "EROFS";

/** The file system's refusals while writing, in words; undefined for other errors. */
export function writeRefusal(err: unknown, exe: string): UpdateError | undefined {
  const code = (err as NodeJS.ErrnoException)?.code;
  if (code === "ENOSPC" || code === "EDQUOT") return new UpdateError("NO_SPACE", `no space left beside ${exe} for the new executable (${code === "EDQUOT" ? "over the disk quota" : "the disk is full"}): free some and run it again`);
  if (refusedWrite(code)) {
    return new UpdateError("NOT_WRITABLE", `cannot write beside ${exe} (${code === "EROFS" ? "a read-only file system" : "permission denied"}): run it as the user who may change that folder, e.g. with sudo`);
  }
  return undefined;
}

/**
 * Holds the lock beside `exe` while `work` runs. A lock whose process is
 * gone (an update that was killed) is taken over.
 */
export async function whileLocked<T>(exe: string, work: () => Promise<T>): Promise<T> {
  const lock = join(dirname(exe), `.${basename(exe)}.update-lock`);
  let fd: number | undefined;
  for (let attempt = 0; fd === undefined; attempt++) {
    try {
      fd = openSync(lock, "wx", 0o600);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== "EEXIST" || attempt > 0) {
        if (code === "EEXIST") throw new UpdateError("IN_PROGRESS", `another burrow update is at work on ${exe} (its lock ${lock} came back while this one took it over)`);
        throw writeRefusal(err, exe) ?? err;
      }
      const holder = Number(readFileSync(lock, "utf8").trim());
      if (Number.isSafeInteger(holder) && holder > 0 && alive(holder)) throw new UpdateError("IN_PROGRESS", `another burrow update (pid ${holder}) is at work on ${exe}: let it finish`);
      rmSync(lock, { force: true });
    }
  }
  try {
    writeSync(fd, `${process.pid}\n`);
    closeSync(fd);
    sweepAbandoned(exe);
    return await work();
  } finally {
    rmSync(lock, { force: true });
  }
}

export interface Staged {
  path: string;
  /** Open for the download; undefined once closed (a number closed twice could be another file's by then). */
  fd: number | undefined;
}

/** A new hidden file beside `exe` for the download; NOT_WRITABLE when the folder is not ours to write. */
export function stageBeside(exe: string): Staged {
  const path = join(dirname(exe), `.${basename(exe)}.update-${process.pid}`);
  try {
    return { path, fd: openSync(path, "wx", 0o700) };
  } catch (err) {
    throw writeRefusal(err, exe) ?? err;
  }
}

/** The downloads of updates that were killed (their process is gone): a file of ~100 MiB each, not to pile up. */
function sweepAbandoned(exe: string): void {
  const prefix = `.${basename(exe)}.update-`;
  let names: string[];
  try {
    names = readdirSync(dirname(exe));
  } catch {
    return; // unreadable folder: writing there says why
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number(name.slice(prefix.length));
    if (!Number.isSafeInteger(pid) || pid <= 0 || (pid !== process.pid && alive(pid))) continue;
    rmSync(join(dirname(exe), name), { force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "EPERM"; // someone else's process
  }
}

/**
 * Flushes and closes the staged file and gives it what the executable had:
 * its mode, and (when we may: as root) its owner and group, so that a
 * service's user may still run it.
 */
export function finishStaged(staged: Staged, exe: string): void {
  const fd = staged.fd!;
  staged.fd = undefined;
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  const was = statSync(exe);
  chmodSync(staged.path, was.mode & 0o7777);
  if (!WINDOWS && process.getuid?.() === 0) chownSync(staged.path, was.uid, was.gid);
}

export function discardStaged(staged: Staged): void {
  if (staged.fd !== undefined) closeSync(staged.fd);
  staged.fd = undefined;
  rmSync(staged.path, { force: true });
}

/** Steps 2 to 4 above; returns where the previous executable is kept. */
export function replaceExecutable(staged: Staged, exe: string): string {
  const previous = previousPath(exe);
  if (WINDOWS) {
    rmSync(previous, { force: true });
    renameSync(exe, previous);
    try {
      renameSync(staged.path, exe);
    } catch (err) {
      renameSync(previous, exe); // never left without one
      throw err;
    }
  } else {
    keepAs(exe, previous);
    renameSync(staged.path, exe);
  }
  syncDirectory(dirname(exe));
  return previous;
}

/** `exe` also under the name `previous`, replacing what was there, atomically. */
function keepAs(exe: string, previous: string): void {
  const temp = `${previous}.${process.pid}`;
  rmSync(temp, { force: true });
  try {
    linkSync(exe, temp);
  } catch {
    copyFileSync(exe, temp); // a file system without hard links
  }
  renameSync(temp, previous);
}

/**
 * --rollback: the kept executable back in place, and the one it replaces
 * kept in its stead (so a second rollback undoes the first). Each step
 * leaves an executable at `exe`; a failure undoes what was done.
 */
export function swapWithPrevious(exe: string): void {
  const previous = previousPath(exe);
  if (!existsSync(previous)) throw new UpdateError("NO_PREVIOUS", `there is no ${basename(previous)} beside ${exe}: nothing to roll back to (burrow update keeps one when it replaces the executable)`);
  // the current one, under a second name first (a hard link; on Windows, moved)
  const current = join(dirname(exe), `.${basename(exe)}.rollback-${process.pid}`);
  try {
    rmSync(current, { force: true });
    if (WINDOWS) renameSync(exe, current);
    else keepAs(exe, current);
  } catch (err) {
    rmSync(current, { force: true });
    throw writeRefusal(err, exe) ?? err;
  }
  try {
    renameSync(previous, exe);
  } catch (err) {
    // nothing changed at exe (on Windows: move it back)
    if (WINDOWS) renameSync(current, exe);
    else rmSync(current, { force: true });
    throw writeRefusal(err, exe) ?? err;
  }
  // the old one is in place; the one taken out keeps its second name if this last step fails
  renameSync(current, previous);
  syncDirectory(dirname(exe));
}
