/**
 * `burrow diagnose --bundle FILE`: one text file for a support request:
 * the report (for people and as JSON), this machine and program, the
 * config file and the agent's recent log, every secret masked (mask.ts).
 * Written mode 0600, whole or not at all.
 *
 * The log: --log-file, else the agent service's (burrow service install):
 * systemd's journal for its unit, the file launchd or WinSW writes.
 */
import { closeSync, existsSync, fstatSync, openSync, readFileSync, readSync } from "node:fs";
import { arch, release, type } from "node:os";
import { win32 } from "node:path";
import { versionText } from "../../version.ts";
import { thisPlatform } from "../service/agent-service.ts";
import { writeWhole } from "../service/service-files.ts";
import { servicePaths } from "../service/service-paths.ts";
import { maskConfig, maskText } from "./mask.ts";
import { reportText, type Report } from "./report.ts";

/** The most of a log file read from its end, whatever --log-lines asks. */
export const MAX_LOG_BYTES = 4 * 1024 * 1024;
/** A config file larger than this is not burrow's (tunnels-file.ts reads 1 MiB at most). */
const MAX_CONFIG_BYTES = 1024 * 1024;

export interface RecentLog {
  /** Where it came from, as a person would find it again. */
  source: string;
  lines: string[];
}

/** The last `count` lines of a file, reading at most MAX_LOG_BYTES from its end. */
export function lastLines(path: string, count: number): string[] {
  const fd = openSync(path, "r");
  try {
    const size = fstatSync(fd).size;
    const length = Math.min(size, MAX_LOG_BYTES);
    const buf = Buffer.alloc(length);
    readSync(fd, buf, 0, length, size - length);
    const lines = buf.toString("utf8").split("\n");
    if (length < size) lines.shift(); // the first may be cut
    if (lines.at(-1) === "") lines.pop();
    return lines.slice(-count);
  } finally {
    closeSync(fd);
  }
}

/** The agent's recent log: the file given, else the installed service's; undefined when none is found. */
export function recentLog(o: { logFile?: string; service: string; lines: number }): RecentLog | undefined {
  if (o.logFile !== undefined) return { source: o.logFile, lines: lastLines(o.logFile, o.lines) };
  const platform = thisPlatform();
  if (platform === "linux") {
    for (const user of [false, true]) {
      const paths = servicePaths({ platform, user, name: o.service });
      const unitThere = existsSync(paths.service) || (!user && (existsSync(`/lib/systemd/system/${paths.unitName}`) || existsSync(`/usr/lib/systemd/system/${paths.unitName}`)));
      if (!unitThere || !Bun.which("journalctl")) continue;
      const cmd = ["journalctl", ...(user ? ["--user"] : []), "-u", paths.unitName, "-n", String(o.lines), "--no-pager", "-o", "short-iso"];
      const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
      const text = p.stdout.toString().slice(-MAX_LOG_BYTES);
      if (p.exitCode === 0) return { source: cmd.join(" "), lines: text.split("\n").filter((l) => l !== "") };
    }
    return undefined;
  }
  for (const user of platform === "macos" ? [true, false] : [false]) {
    if (!platform) break;
    const paths = servicePaths({ platform, user, name: o.service });
    const file = platform === "windows" ? win32.join(paths.log!, `${o.service}.out.log`) : paths.log;
    if (file && existsSync(file)) return { source: file, lines: lastLines(file, o.lines) };
  }
  return undefined;
}

export function bundleText(r: Report, o: { configPath?: string; log?: RecentLog; logLines: number; service: string }): string {
  const section = (title: string, body: string) => `===== ${title} =====\n${body.replace(/\n*$/, "\n")}`;
  const parts = [
    `burrow diagnose bundle, written ${new Date().toISOString()}\nSecrets are masked (tokens, passwords, cookies, credentials); read it before you send it.\n`,
    section("burrow", versionText()),
    section("this machine", `${type()} ${release()} ${arch()}\n`),
    section("report", reportText(r)),
    section("report (JSON)", JSON.stringify(r, null, 2)),
  ];
  if (o.configPath !== undefined) {
    let text: string;
    try {
      const raw = readFileSync(o.configPath);
      text = raw.byteLength > MAX_CONFIG_BYTES ? "(larger than 1 MiB: left out)" : maskConfig(raw.toString("utf8"));
    } catch (err) {
      text = `(cannot be read: ${(err as NodeJS.ErrnoException).code ?? "error"})`;
    }
    parts.push(section(`config file ${o.configPath} (secrets masked)`, text));
  }
  parts.push(
    o.log
      ? section(`the agent's log: ${o.log.source}, its last ${o.log.lines.length} lines (secrets masked)`, o.log.lines.map(maskText).join("\n"))
      : section("the agent's log", `none found: no --log-file, and no service ${o.service} installed here (burrow service install). Run the agent with --log text > FILE (or --log json) and give that file with --log-file FILE.`),
  );
  return parts.join("\n");
}

/** Writes the bundle, mode 0600 (it names this machine, its server and its tunnels). */
export function writeBundle(path: string, text: string): void {
  writeWhole(path, text, 0o600, 0o700);
}
