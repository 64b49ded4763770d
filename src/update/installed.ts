/**
 * What the machine says about the executable being replaced: a systemd
 * service that runs it (to be restarted by its admin, never by burrow
 * update), and a package manager that owns it (which must do the upgrade,
 * or its records of the file would be wrong).
 */
import { existsSync, readdirSync, readFileSync, realpathSync, statSync } from "node:fs";
import { join } from "node:path";

export const UNIT_DIRS = ["/etc/systemd/system", "/run/systemd/system", "/usr/local/lib/systemd/system", "/lib/systemd/system", "/usr/lib/systemd/system"];

/** The systemd services whose ExecStart runs `exe` (any of its names, or a link to it). */
export function servicesRunning(names: readonly string[], dirs: readonly string[] = UNIT_DIRS): string[] {
  const found = new Set<string>();
  const runs = (word: string) => {
    const path = word.replace(/^[-@:+!]+/, "");
    if (!path.startsWith("/")) return false;
    if (names.includes(path)) return true;
    try {
      return names.includes(realpathSync(path)); // /usr/local/bin/burrow -> /opt/burrow/burrow
    } catch {
      return false;
    }
  };
  for (const dir of dirs) {
    let files: string[];
    try {
      files = readdirSync(dir).filter((f) => f.endsWith(".service"));
    } catch {
      continue;
    }
    for (const file of files) {
      try {
        const path = join(dir, file);
        if (statSync(path).size > 64 << 10) continue;
        const text = readFileSync(path, "utf8");
        const execStart = text.split("\n").filter((l) => /^\s*ExecStart\s*=/.test(l));
        // the command is ExecStart's first word
        if (execStart.some((l) => runs(l.replace(/^\s*ExecStart\s*=\s*/, "").split(/\s/)[0] ?? ""))) found.add(file.slice(0, -".service".length));
      } catch {
        // unreadable: not ours to judge
      }
    }
  }
  return [...found].sort();
}

/** The package manager that installed `exe`, if one did (Debian's dpkg or RPM). */
export function packagedBy(exe: string, dpkgInfo = "/var/lib/dpkg/info"): "dpkg" | "rpm" | undefined {
  const list = join(dpkgInfo, "burrow.list");
  if (existsSync(list) && readFileSync(list, "utf8").split("\n").includes(exe)) return "dpkg";
  const rpm = Bun.which("rpm");
  if (rpm && dpkgInfo === "/var/lib/dpkg/info") {
    const q = Bun.spawnSync([rpm, "-qf", exe], { stdout: "pipe", stderr: "ignore" });
    if (q.exitCode === 0 && /^burrow-\d/.test(q.stdout.toString())) return "rpm";
  }
  return undefined;
}
