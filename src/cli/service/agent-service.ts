/**
 * The agent as a service, whatever runs it (systemd, launchd, a Windows
 * service wrapper): what `burrow start` is run with. Each platform's file
 * (systemd-agent-unit.ts, launchd-plist.ts, winsw-xml.ts) is pure text
 * made from this spec, so every one is tested on any machine.
 */

/** Where the service runs: what the command writes, and what it asks to start it. */
export type ServicePlatform = "linux" | "macos" | "windows";
export const SERVICE_PLATFORMS: readonly ServicePlatform[] = ["linux", "macos", "windows"];

/** The platform this program runs on, as a service platform; undefined where it has none (FreeBSD...). */
export function thisPlatform(platform: NodeJS.Platform = process.platform): ServicePlatform | undefined {
  return platform === "linux" ? "linux" : platform === "darwin" ? "macos" : platform === "win32" ? "windows" : undefined;
}

/** The name of the service unless --name says another: the unit is burrow-agent.service. */
export const DEFAULT_SERVICE_NAME = "burrow-agent";
/**
 * A service name: what a unit's, a plist's and a Windows service's name may
 * all be without quoting, and never "--" (it is said in XML comments).
 */
export const SERVICE_NAME = /^(?=.{1,63}$)[a-z0-9]+(-[a-z0-9]+)*$/;

/**
 * The first words of every file the command writes: uninstall removes only
 * a file that carries them, and install replaces only such a file.
 */
export const WRITTEN_BY = "Written by `burrow service install`";
/** Whether a service file's text is one `burrow service install` wrote. */
export const writtenByUs = (text: string) => text.slice(0, 400).includes(WRITTEN_BY);

/**
 * --drain-timeout's default (a pool member's leaving), and what a stop
 * waits on top of it before the service manager kills the agent.
 */
export const AGENT_DRAIN_S = 15;
export const AGENT_STOP_TIMEOUT_S = AGENT_DRAIN_S + 15;

export interface AgentServiceSpec {
  /** The service's name (SERVICE_NAME). */
  name: string;
  /** Absolute path of the burrow executable. */
  binary: string;
  /** The tunnels of a config file (absolute path), or those the server holds for the token (`burrow start --remote`). */
  tunnels: { config: string } | { remote: true };
  /** The server's URL; undefined: the config file's `server:`. */
  server?: string;
  /** The token file as the running agent opens it. */
  tokenFile: string;
  /** A proxy with no password in it (the files are readable by all). */
  proxy?: string;
  insecure?: boolean;
}

/**
 * `burrow start`'s words after the executable. `tokenFile` is given apart
 * because systemd's system unit names it by a specifier (%d) that must not
 * be quoted away; the others are plain words.
 */
export function agentWords(spec: AgentServiceSpec): { before: string[]; tokenFile: string; after: string[] } {
  const before = ["start", ...("remote" in spec.tunnels ? ["--remote"] : ["--all", "--config", spec.tunnels.config])];
  if (spec.server !== undefined) before.push("--server", spec.server);
  before.push("--token-file");
  const after: string[] = [];
  if (spec.proxy !== undefined) after.push("--proxy", spec.proxy);
  if (spec.insecure) after.push("--insecure");
  // a line per event: what a journal or a log file keeps (a service has no terminal for the screen)
  after.push("--log", "text");
  return { before, tokenFile: spec.tokenFile, after };
}

/** The words in order, for a file that quotes each word the same way. */
export function agentArgs(spec: AgentServiceSpec): string[] {
  const w = agentWords(spec);
  return [...w.before, w.tokenFile, ...w.after];
}

/** What the service does, in a line of its description. */
export function serviceDescription(spec: AgentServiceSpec): string {
  const what = "remote" in spec.tunnels ? "the tunnels the server holds for its token" : `the tunnels of ${spec.tunnels.config}`;
  return `burrow agent (${spec.name}): ${what}${spec.server ? ` on ${spec.server}` : ""}`;
}
