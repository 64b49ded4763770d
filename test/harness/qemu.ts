/**
 * Running the linux-arm64 release build on this x64 machine: Debian's
 * qemu-user-static with the arm64 C library (libc6-arm64-cross) and libgcc
 * (libgcc-s1-arm64-cross, which argon2's binding links), run as
 * `qemu-aarch64-static -L /usr/aarch64-linux-gnu ./burrow ...`. Installed
 * with apt-get when missing, as for Chromium.
 */
import { existsSync } from "node:fs";
import { aptInstall } from "./debian-packages.ts";

const QEMU = "/usr/bin/qemu-aarch64-static";
export const ARM64_SYSROOT = "/usr/aarch64-linux-gnu";
const NEEDED = [QEMU, `${ARM64_SYSROOT}/lib/ld-linux-aarch64.so.1`, `${ARM64_SYSROOT}/lib/libgcc_s.so.1`];
const PACKAGES = ["qemu-user-static", "libc6-arm64-cross", "libgcc-s1-arm64-cross"];

const present = () => NEEDED.every((p) => existsSync(p));
let found: boolean | null = null;

/** The words that run an arm64 Linux executable here, or undefined where qemu-user cannot be had. */
export function arm64Runner(): string[] | undefined {
  if (process.platform === "linux" && process.arch === "arm64") return [];
  if (process.platform !== "linux" || process.arch !== "x64") return undefined;
  found ??= present() || (aptInstall(PACKAGES, "release tests: no qemu-user for arm64") && present());
  return found ? [QEMU, "-L", ARM64_SYSROOT] : undefined;
}
