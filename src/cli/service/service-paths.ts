/**
 * Where the agent's service files go on each platform, as the service sees
 * them (the paths written into them), and where the command writes them:
 * the same, or below --root (BURROW_SERVICE_ROOT) for packaging and tests,
 * which then touch nothing of the machine's. Pure: platform, environment
 * and home directory are arguments.
 */
import { homedir } from "node:os";
import { posix, win32 } from "node:path";
import { configDir } from "../../agent/settings/paths.ts";
import type { ServicePlatform } from "./agent-service.ts";

type Env = Record<string, string | undefined>;

export interface ServicePaths {
  /** The unit, plist or WinSW file. */
  service: string;
  /** The token file, mode 0600 (read by root's systemd and copied, or by the service's user). */
  token: string;
  /** Where the agent's lines go when the service manager keeps none itself (launchd, WinSW); undefined: the journal. */
  log?: string;
  /** How the service is called by its manager: burrow-agent.service, a launchd label, a Windows service id. */
  unitName: string;
}

export interface PathContext {
  platform: ServicePlatform;
  user: boolean;
  name: string;
  env?: Env;
  home?: string;
}

export function servicePaths(c: PathContext): ServicePaths {
  const env = c.env ?? process.env;
  const home = env.HOME || c.home || homedir();
  switch (c.platform) {
    case "linux": {
      const unitName = `${c.name}.service`;
      if (!c.user) return { service: `/etc/systemd/system/${unitName}`, token: `/etc/burrow/${c.name}.token`, unitName };
      const config = env.XDG_CONFIG_HOME || posix.join(home, ".config");
      return { service: posix.join(config, "systemd", "user", unitName), token: posix.join(configDir(env, "linux", home), `${c.name}.token`), unitName };
    }
    case "macos": {
      if (!c.user) {
        return { service: `/Library/LaunchDaemons/${c.name}.plist`, token: `/Library/Application Support/burrow/${c.name}.token`, log: `/Library/Logs/burrow/${c.name}.log`, unitName: c.name };
      }
      return {
        service: posix.join(home, "Library", "LaunchAgents", `${c.name}.plist`),
        token: posix.join(configDir(env, "darwin", home), `${c.name}.token`),
        log: posix.join(home, "Library", "Logs", "burrow", `${c.name}.log`),
        unitName: c.name,
      };
    }
    case "windows": {
      const dir = win32.join(env.ProgramData || env.PROGRAMDATA || "C:\\ProgramData", "burrow");
      return { service: win32.join(dir, `${c.name}.xml`), token: win32.join(dir, `${c.name}.token`), log: win32.join(dir, "logs"), unitName: c.name };
    }
  }
}

/** The executable a service runs when this one is not compiled (run from source): where the installer puts burrow. */
export function defaultBinary(platform: ServicePlatform): string {
  return platform === "windows" ? "C:\\Program Files\\burrow\\burrow.exe" : "/usr/local/bin/burrow";
}

/**
 * Where the command writes `path` (a path as the service sees it): itself,
 * or below `root`. A Windows path below a root keeps its drive as a folder
 * (C:\ProgramData\burrow -> ROOT/C/ProgramData/burrow).
 */
export function underRoot(root: string | undefined, path: string): string {
  if (root === undefined) return path;
  const parts = /^[A-Za-z]:\\/.test(path) ? [path[0]!, ...path.slice(3).split("\\")] : path.split("/");
  return posix.join(root, ...parts.filter((p) => p !== ""));
}

/** Whether a path is a user's own (a home directory), out of reach of a system service's sandbox (ProtectHome=yes). */
export function inHomeDirectory(path: string): boolean {
  return /^\/(home|root|run\/user)(\/|$)/.test(posix.normalize(path));
}
