/**
 * The Debian package of the compiled executable (build/deb.ts), with
 * Debian's own tools: dpkg-deb says what it holds and with which modes;
 * dpkg installs it into a root made for the test (its own admin dir, the
 * maintainer scripts run without chroot, told so by DPKG_ROOT, so they
 * touch no systemd), the executable runs from there, systemd-analyze
 * verifies the unit, and removing then purging the package takes away what
 * it put there.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildDeb, packageAgentUnit, packageUnit } from "../../build/deb.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { packagedBy, servicesRunning } from "../../src/update/installed.ts";
import pkg from "../../package.json";

const dpkg = Bun.which("dpkg-deb") && Bun.which("dpkg");
const analyze = Bun.which("systemd-analyze");
const arch = process.arch === "arm64" ? "arm64" : "amd64";

describe.skipIf(!dpkg || process.platform !== "linux")("the .deb", () => {
  let work: string;
  let deb: string;
  let root: string;
  const run = (cmd: string[]) => {
    const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
    return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
  };
  const dpkgIn = (...args: string[]) => run(["dpkg", `--instdir=${root}`, `--admindir=${join(root, "var/lib/dpkg")}`, "--force-script-chrootless", "--force-not-root", ...args]);

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "burrow-deb-test-"));
    deb = buildDeb({ executable: await compiledBurrow(join(work, "exe")), version: pkg.version, arch, outdir: join(work, "out") });
    root = join(work, "root");
    mkdirSync(join(root, "var/lib/dpkg/info"), { recursive: true });
    mkdirSync(join(root, "var/lib/dpkg/updates"), { recursive: true });
    writeFileSync(join(root, "var/lib/dpkg/status"), "");
  }, 120_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("dpkg-deb: the package's name, version and architecture, and its files with their modes", () => {
    expect(deb.endsWith(`burrow_${pkg.version}_${arch}.deb`)).toBe(true);
    const info = run(["dpkg-deb", "--info", deb]).out;
    expect(info).toContain("Package: burrow");
    expect(info).toContain(`Version: ${pkg.version}`);
    expect(info).toContain(`Architecture: ${arch}`);
    const contents = run(["dpkg-deb", "--contents", deb]).out;
    expect(contents).toMatch(/^drwxr-xr-x root\/root\s+0 \S+ \S+ \.\/$/m);
    expect(contents).toMatch(/-rwxr-xr-x root\/root\s+\d+ \S+ \S+ \.\/usr\/bin\/burrow$/m);
    expect(contents).toMatch(/-rw-r--r-- root\/root\s+\d+ \S+ \S+ \.\/lib\/systemd\/system\/burrow\.service$/m);
    expect(contents).toMatch(/-rw-r--r-- root\/root\s+\d+ \S+ \S+ \.\/lib\/systemd\/system\/burrow-agent\.service$/m);
    expect(contents).toMatch(/-rw------- root\/root\s+\d+ \S+ \S+ \.\/etc\/burrow\/burrow\.env$/m);
  });

  test("installed into a root: the executable runs, the unit verifies, the settings file is a conffile readable by root only", () => {
    const installed = dpkgIn("-i", deb);
    expect(installed.code).toBe(0);
    expect(installed.out).toContain("set BURROW_DOMAIN in /etc/burrow/burrow.env");
    const version = run([join(root, "usr/bin/burrow"), "--version"]);
    expect(version.code).toBe(0);
    expect(version.out).toContain(`burrow ${pkg.version}`);
    expect(statSync(join(root, "etc/burrow/burrow.env")).mode & 0o777).toBe(0o600);
    const unit = readFileSync(join(root, "lib/systemd/system/burrow.service"), "utf8");
    expect(unit).toBe(packageUnit());
    expect(unit).toContain("EnvironmentFile=/etc/burrow/burrow.env");
    expect(unit).toContain("DynamicUser=yes");
    expect(run(["dpkg-query", `--admindir=${join(root, "var/lib/dpkg")}`, "-W", "-f=${Conffiles}", "burrow"]).out).toContain("/etc/burrow/burrow.env");
    // what burrow update reads: the package owns the executable (so apt must upgrade it), and its unit runs it
    expect(packagedBy("/usr/bin/burrow", join(root, "var/lib/dpkg/info"))).toBe("dpkg");
    expect(packagedBy("/usr/local/bin/burrow", join(root, "var/lib/dpkg/info"))).toBeUndefined();
    expect(servicesRunning(["/usr/bin/burrow"], [join(root, "etc/systemd/system"), join(root, "lib/systemd/system")])).toEqual(["burrow", "burrow-agent"]);
    expect(servicesRunning(["/usr/local/bin/burrow"], [join(root, "lib/systemd/system")])).toEqual([]);
    if (analyze) {
      // systemd-analyze checks that ExecStart's file can run: the one installed in this root
      const dir = join(work, "verify");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "burrow.service"), unit.replace("ExecStart=/usr/bin/burrow", `ExecStart=${join(root, "usr/bin/burrow")}`));
      const verified = run([analyze, "verify", "--man=no", join(dir, "burrow.service")]);
      expect(verified).toEqual({ code: 0, out: "" });
    }
  });

  test("the agent's unit: installed, never enabled by the package, sandboxed, its token a credential; it verifies", () => {
    const unit = readFileSync(join(root, "lib/systemd/system/burrow-agent.service"), "utf8");
    expect(unit).toBe(packageAgentUnit());
    expect(unit).toContain("ExecStart=/usr/bin/burrow start --all --config /etc/burrow/burrow-agent.yml --token-file %d/token --log text");
    expect(unit).toContain("LoadCredential=token:/etc/burrow/burrow-agent.token");
    expect(unit).toContain("DynamicUser=yes");
    expect(unit).toContain("ProtectSystem=strict");
    // disabled: no link in any .wants directory of the root
    expect(existsSync(join(root, "etc/systemd/system/multi-user.target.wants"))).toBe(false);
    if (analyze) {
      const dir = join(work, "verify-agent");
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, "burrow-agent.service"), unit.replace("ExecStart=/usr/bin/burrow", `ExecStart=${join(root, "usr/bin/burrow")}`));
      expect(run([analyze, "verify", "--man=no", join(dir, "burrow-agent.service")])).toEqual({ code: 0, out: "" });
    }
  });

  test("removed: its files go, the settings stay; purged: the settings go too", () => {
    expect(dpkgIn("--remove", "burrow").code).toBe(0);
    expect(existsSync(join(root, "usr/bin/burrow"))).toBe(false);
    expect(packagedBy("/usr/bin/burrow", join(root, "var/lib/dpkg/info"))).toBeUndefined();
    expect(existsSync(join(root, "lib/systemd/system/burrow.service"))).toBe(false);
    expect(existsSync(join(root, "lib/systemd/system/burrow-agent.service"))).toBe(false);
    expect(existsSync(join(root, "etc/burrow/burrow.env"))).toBe(true);
    const purged = dpkgIn("--purge", "burrow");
    expect(purged.code).toBe(0);
    expect(existsSync(join(root, "etc/burrow"))).toBe(false);
  });
});
