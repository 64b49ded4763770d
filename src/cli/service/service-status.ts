/**
 * `burrow service status`: the files install wrote (there, ours, the token
 * file private), what the service runs, and where systemctl can be asked
 * (Linux, no --root) whether it runs and how often it was restarted.
 */
import { statSync } from "node:fs";
import type { ServiceTarget } from "./service-plan.ts";
import { standing } from "./service-files.ts";
import { underRoot } from "./service-paths.ts";

/** The systemd properties status reads (systemctl show). */
const PROPERTIES = ["ActiveState", "SubState", "UnitFileState", "NRestarts", "ExecMainStatus", "ActiveEnterTimestamp"];

/** Exit codes: as `systemctl status` and LSB init scripts use them. */
export const STATUS_EXIT = { running: 0, notRunning: 1, notInstalled: 3 } as const;

export function serviceStatus(t: ServiceTarget): number {
  const serviceFile = underRoot(t.root, t.paths.service);
  const tokenFile = underRoot(t.root, t.paths.token);
  const now = standing(serviceFile);
  const out = [`${t.paths.unitName}: ${t.user ? "the user's" : "a system"} ${t.platform === "linux" ? "systemd unit" : t.platform === "macos" ? "launchd job" : "Windows service (WinSW)"}`];
  if (now.kind === "absent") {
    out.push(`  not installed (no ${serviceFile}): burrow service install${t.user ? " --user" : ""}`);
    process.stdout.write(`${out.join("\n")}\n`);
    return STATUS_EXIT.notInstalled;
  }
  let healthy = true;
  if (now.kind === "foreign") {
    out.push(`  ${serviceFile}: ${now.why}; burrow service leaves it alone`);
    process.stdout.write(`${out.join("\n")}\n`);
    return STATUS_EXIT.notRunning;
  }
  out.push(`  file:    ${serviceFile}`);
  const runs = commandLine(now.text, t.platform);
  if (runs) out.push(`  runs:    ${runs}`);
  try {
    const mode = statSync(tokenFile).mode & 0o777;
    const open = t.platform !== "windows" && (mode & 0o077) !== 0;
    if (open) healthy = false;
    out.push(`  token:   ${tokenFile} (mode ${mode.toString(8).padStart(4, "0")}${open ? `: readable by others, chmod 600 ${tokenFile}` : ""})`);
  } catch {
    healthy = false;
    out.push(`  token:   ${tokenFile} is missing: the service cannot sign in (burrow service install again)`);
  }
  const state = t.live && t.platform === "linux" ? systemdState(t) : undefined;
  if (state) {
    const active = state.ActiveState === "active";
    if (!active) healthy = false;
    out.push(`  state:   ${state.ActiveState ?? "?"} (${state.SubState ?? "?"}), ${state.UnitFileState ?? "?"}; restarts: ${state.NRestarts ?? "?"}${active ? `; since ${state.ActiveEnterTimestamp}` : `; last exit status ${state.ExecMainStatus ?? "?"}`}`);
    out.push(`  log:     journalctl ${t.user ? "--user " : ""}-u ${t.paths.unitName}`);
  } else if (t.paths.log !== undefined) {
    out.push(`  log:     ${t.paths.log}`);
  }
  process.stdout.write(`${out.join("\n")}\n`);
  return healthy ? STATUS_EXIT.running : STATUS_EXIT.notRunning;
}

/** What the service file runs, as a line (its ExecStart, ProgramArguments or executable and arguments). */
export function commandLine(text: string, platform: ServiceTarget["platform"]): string | undefined {
  if (platform === "linux") return /^ExecStart=(.*)$/m.exec(text)?.[1];
  if (platform === "macos") {
    const array = /<key>ProgramArguments<\/key>\s*<array>([\s\S]*?)<\/array>/.exec(text)?.[1];
    return array && [...array.matchAll(/<string>([^<]*)<\/string>/g)].map((m) => unescapeXml(m[1]!)).join(" ");
  }
  const exe = /<executable>([^<]*)<\/executable>/.exec(text)?.[1];
  const args = /<arguments>([^<]*)<\/arguments>/.exec(text)?.[1];
  return exe && unescapeXml(`${exe} ${args ?? ""}`.trim());
}

/** The five entities the service files escape (launchd-plist.ts, winsw-xml.ts). */
const unescapeXml = (text: string) => text.replace(/&(lt|gt|quot|apos|amp);/g, (_, e: string) => ({ lt: "<", gt: ">", quot: '"', apos: "'", amp: "&" })[e]!);

function systemdState(t: ServiceTarget): Record<string, string> | undefined {
  if (!Bun.which("systemctl")) return undefined;
  const p = Bun.spawnSync(["systemctl", ...(t.user ? ["--user"] : []), "show", t.paths.unitName, ...PROPERTIES.map((p) => `--property=${p}`)], { stdout: "pipe", stderr: "ignore", stdin: "ignore" });
  if (p.exitCode !== 0) return undefined;
  const fields = Object.fromEntries(p.stdout.toString().split("\n").flatMap((l) => {
    const at = l.indexOf("=");
    return at > 0 ? [[l.slice(0, at), l.slice(at + 1)]] : [];
  }));
  return Object.keys(fields).length > 0 ? fields : undefined;
}
