/**
 * System programs some tests drive (Chromium for the panel, qemu-user for the
 * arm64 release build). Where one is missing on Debian or Ubuntu, and we are
 * root or have password-less sudo, its Debian packages are installed once
 * with apt-get, as .ci/run does, so `npm ci && npm test` passes on a fresh
 * machine with nothing installed by hand.
 */
import { existsSync } from "node:fs";

function canApt(): string[] | undefined {
  if (process.platform !== "linux" || !existsSync("/usr/bin/apt-get")) return undefined;
  if (process.getuid?.() === 0) return [];
  const sudo = Bun.spawnSync(["sudo", "-n", "true"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
  return sudo ? ["sudo", "-n"] : undefined;
}

let updated = false;

/** Installs `packages` with apt-get; false where that cannot be done here or fails. */
export function aptInstall(packages: string[], why: string): boolean {
  const sudo = canApt();
  if (sudo === undefined || packages.length === 0) return false;
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  console.error(`${why}: installing Debian's ${packages.join(", ")} (apt-get)`);
  const commands = [...(updated ? [] : [[...sudo, "apt-get", "update", "-q"]]), [...sudo, "apt-get", "install", "-y", "-q", ...packages]];
  for (const cmd of commands) {
    if (Bun.spawnSync(cmd, { env, stdout: "ignore", stderr: "inherit", stdin: "ignore" }).exitCode !== 0) return false;
  }
  updated = true;
  return true;
}
