/**
 * The tools the agent service's tests read its files with: systemd's own
 * `systemd-analyze verify` (Debian's systemd package) for the units, and
 * python3's plistlib and xml.etree for the launchd plist and the Windows
 * service's XML. Installed with apt-get where missing (as .ci/run does).
 */
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";

/** systemd-analyze's path, installing Debian's systemd package first where it is missing; undefined where that cannot be done. */
export function systemdAnalyze(): string | undefined {
  const found = Bun.which("systemd-analyze");
  if (found) return found;
  if (aptInstall(["systemd"], "the agent service's unit tests")) return Bun.which("systemd-analyze") ?? undefined;
  return undefined;
}

/** python3's path, installing Debian's python3 first where it is missing. */
export function python3(): string | undefined {
  const found = Bun.which("python3");
  if (found) return found;
  if (aptInstall(["python3"], "the agent service's plist and XML tests")) return Bun.which("python3") ?? (existsSync("/usr/bin/python3") ? "/usr/bin/python3" : undefined);
  return undefined;
}

/**
 * `systemd-analyze verify` of one unit file: its exit code and all it
 * said. A user unit is verified against a user manager, which wants a
 * runtime directory of its own.
 */
export function verifyUnit(file: string, user = false): { code: number | null; out: string } {
  const analyze = systemdAnalyze();
  if (!analyze) throw new Error("systemd-analyze is not installed: install Debian's systemd package (.ci/run installs it)");
  const runtime = user ? mkdtempSync(join(tmpdir(), "burrow-runtime-")) : undefined;
  try {
    const p = Bun.spawnSync([analyze, "verify", ...(user ? ["--user"] : []), "--man=no", file], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, ...(runtime ? { XDG_RUNTIME_DIR: runtime } : {}) },
    });
    return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
  } finally {
    if (runtime) rmSync(runtime, { recursive: true, force: true });
  }
}

/** A python3 program's standard output read as JSON (the program prints one JSON value). */
export function python3Json(program: string, ...args: string[]): unknown {
  const python = python3();
  if (!python) throw new Error("python3 is not installed: install Debian's python3 package");
  const p = Bun.spawnSync([python, "-c", program, ...args], { stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`python3 failed: ${p.stderr.toString().slice(-2000)}`);
  return JSON.parse(p.stdout.toString());
}
