/**
 * One temporary directory per test file, made the process's TMPDIR by the
 * preload before the file's tests start (bun test --parallel runs the preload
 * again for each file, in a fresh global): every mkdtemp of a harness or a
 * test, and of the servers and agents they spawn (who inherit the variable),
 * lands inside it, and it goes in one piece when the file ends, whatever the
 * tests left behind (a failed test's data dir, the compiled executables,
 * agents' homes).
 *
 * A run that was killed cannot remove its own; the next run removes every
 * such directory whose owner process is gone.
 */
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const PREFIX = "burrow-tests-";
const OWNER_FILE = ".owner-pid";

function ownerGone(dir: string): boolean {
  let pid: number;
  try {
    pid = Number(readFileSync(join(dir, OWNER_FILE), "utf8"));
  } catch {
    // no owner file: another run's, just made, or very old
    try {
      return Date.now() - statSync(dir).mtimeMs > 3_600_000;
    } catch {
      return false;
    }
  }
  if (!Number.isInteger(pid) || pid <= 0) return true;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/** Makes the file's directory, sets TMPDIR to it, and returns a function that removes it. */
export function useScratchTmpdir(): () => void {
  const base = tmpdir();
  for (const name of readdirSync(base)) {
    if (!name.startsWith(PREFIX)) continue;
    const dir = join(base, name);
    if (ownerGone(dir)) rmSync(dir, { recursive: true, force: true });
  }
  const dir = mkdtempSync(join(base, PREFIX));
  writeFileSync(join(dir, OWNER_FILE), String(process.pid));
  // searchable by others: the private PostgreSQL servers run as the postgres
  // user when the tests run as root, and keep their socket in a directory here
  chmodSync(dir, 0o711);
  process.env.TMPDIR = dir;
  return () => {
    process.env.TMPDIR = base;
    rmSync(dir, { recursive: true, force: true });
  };
}
