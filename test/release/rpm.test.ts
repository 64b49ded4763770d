/**
 * The RPM package of the compiled executable (build/rpm.ts), with rpm's own
 * tools (Debian's `rpm` package): `rpm -qip` and `rpm -qlp` say what it is
 * and holds, with which modes, which file is its config, and its scriptlets;
 * installed into a root with its own database (scriptlets off: they are for
 * a real system), the executable runs from there; erased, it is gone.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildRpm } from "../../build/rpm.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import pkg from "../../package.json";

if (process.platform === "linux" && !Bun.which("rpmbuild")) aptInstall(["rpm"], "rpm package tests");
const arch = process.arch === "arm64" ? "aarch64" : "x86_64";

describe.skipIf(!Bun.which("rpmbuild") || !Bun.which("rpm"))("the .rpm", () => {
  let work: string;
  let file: string;
  const rpm = (...args: string[]) => {
    const p = Bun.spawnSync(["rpm", ...args], { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
  };

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "burrow-rpm-test-"));
    file = buildRpm({ executable: await compiledBurrow(join(work, "exe")), version: pkg.version, arch, outdir: join(work, "out"), epoch: 1_700_000_000 });
  }, 120_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("rpm -qip and -qlp: its name, version, architecture, files with their modes, its config file and scriptlets", () => {
    expect(file.endsWith(`burrow-${pkg.version}-1.${arch}.rpm`)).toBe(true);
    const info = rpm("-qip", file).out;
    expect(info).toMatch(/^Name\s*: burrow$/m);
    expect(info).toMatch(new RegExp(`^Version\\s*: ${pkg.version.replace(/-/g, "~")}$`, "m"));
    expect(info).toMatch(new RegExp(`^Architecture: ${arch}$`, "m"));
    expect(info).toMatch(/^Build Host\s*: burrow$/m);
    const files = rpm("-qlvp", file).out;
    expect(files).toMatch(/^-rwxr-xr-x\s+1 root\s+root\s+\d+ .* \/usr\/bin\/burrow$/m);
    expect(files).toMatch(/^-rw-r--r--\s+1 root\s+root\s+\d+ .* \/usr\/lib\/systemd\/system\/burrow\.service$/m);
    expect(files).toMatch(/^-rw-r--r--\s+1 root\s+root\s+\d+ .* \/usr\/lib\/systemd\/system\/burrow-agent\.service$/m);
    expect(files).toMatch(/^-rw-------\s+1 root\s+root\s+\d+ .* \/etc\/burrow\/burrow\.env$/m);
    expect(rpm("-qcp", file).out.trim()).toBe("/etc/burrow/burrow.env");
    const scripts = rpm("-qp", "--scripts", file).out;
    expect(scripts).toContain("systemctl disable --now burrow.service");
    expect(scripts).not.toContain("enable --now burrow.service");
    expect(scripts).toContain("burrow-agent.service");
    expect(scripts).not.toMatch(/enable[^\n]*burrow-agent/);
  });

  test("installed into a root of its own, the executable runs; erased, it is gone", () => {
    const root = join(work, "root");
    expect(rpm("--root", root, "--initdb").code).toBe(0);
    expect(rpm("--root", root, "-i", "--nodeps", "--noscripts", file).code).toBe(0);
    const ran = Bun.spawnSync([join(root, "usr/bin/burrow"), "--version"], { stdout: "pipe" });
    expect(ran.exitCode).toBe(0);
    expect(ran.stdout.toString()).toContain(`burrow ${pkg.version}`);
    expect(existsSync(join(root, "usr/lib/systemd/system/burrow-agent.service"))).toBe(true);
    expect(rpm("--root", root, "-q", "burrow").out.trim()).toBe(`burrow-${pkg.version.replace(/-/g, "~")}-1.${arch}`);
    expect(rpm("--root", root, "-e", "--noscripts", "burrow").code).toBe(0);
    expect(existsSync(join(root, "usr/bin/burrow"))).toBe(false);
    expect(existsSync(join(root, "usr/lib/systemd/system/burrow-agent.service"))).toBe(false);
  });
});
