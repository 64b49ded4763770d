/**
 * The service's files on disk: written whole or not at all (a temporary
 * file renamed into place), the token file private from its first byte,
 * and nothing replaced or removed that `burrow service install` did not
 * write.
 */
import { chmodSync, existsSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";
import { writtenByUs } from "./agent-service.ts";

/** A service file is a few KiB: anything bigger at its path is not one of ours, and is not read whole. */
const MAX_SERVICE_FILE = 64 * 1024;

export type Standing = { kind: "absent" } | { kind: "ours"; text: string } | { kind: "foreign"; why: string };

/** What is at a service file's path now. */
export function standing(path: string): Standing {
  let st;
  try {
    st = lstatSync(path);
  } catch {
    return { kind: "absent" };
  }
  if (!st.isFile()) return { kind: "foreign", why: st.isSymbolicLink() ? "it is a symbolic link" : "it is not a plain file" };
  if (st.size > MAX_SERVICE_FILE) return { kind: "foreign", why: "burrow did not write it" };
  const text = readFileSync(path, "utf8");
  return writtenByUs(text) ? { kind: "ours", text } : { kind: "foreign", why: "burrow did not write it" };
}

/** Why a write failed, as the person running the command can act on it. */
export function writeFailure(what: string, path: string, err: unknown): string {
  const code = (err as NodeJS.ErrnoException).code;
  const hint = code === "EACCES" || code === "EPERM" ? ": permission denied (a system service is installed as root: sudo, or --user for your own)" : `: ${(err as Error).message}`;
  return `cannot write the ${what} ${path}${hint}`;
}

/**
 * Writes `text` at `path` through a temporary file in the same directory,
 * created with `mode` (never an existing file followed or opened) and
 * renamed over the old one: a reader sees the old file or the new, never
 * half of one, and a private file is never readable by others, not even
 * for a moment.
 */
export function writeWhole(path: string, text: string, mode: number, dirMode: number): void {
  mkdirSync(dirname(path), { recursive: true, mode: dirMode });
  const temporary = `${path}.${process.pid}.${crypto.randomUUID().slice(0, 8)}.tmp`;
  try {
    writeFileSync(temporary, text, { mode, flag: "wx" });
    chmodSync(temporary, mode); // the umask may have taken bits away
    renameSync(temporary, path);
  } catch (err) {
    rmSync(temporary, { force: true });
    throw err;
  }
}

/** Removes a file, saying whether one was there. */
export function removeFile(path: string): boolean {
  if (!existsSync(path)) return false;
  rmSync(path);
  return true;
}
