/**
 * Where burrow keeps the agent's saved settings, per platform, as each
 * platform's users expect:
 * - Linux and other Unixes: $XDG_CONFIG_HOME/burrow, else ~/.config/burrow;
 * - macOS: $XDG_CONFIG_HOME/burrow when it is set (people who set it want
 *   it used), else ~/Library/Application Support/burrow;
 * - Windows: %APPDATA%\burrow, else %USERPROFILE%\AppData\Roaming\burrow.
 * Pure: the platform and home directory are arguments, so every platform's
 * answer can be tested on any machine.
 */
import { homedir } from "node:os";
import { posix, win32 } from "node:path";

type Env = Record<string, string | undefined>;

export function configDir(env: Env = process.env, platform: NodeJS.Platform = process.platform, home: string = homedir()): string {
  if (platform === "win32") {
    const appData = env.APPDATA || win32.join(env.USERPROFILE || home, "AppData", "Roaming");
    return win32.join(appData, "burrow");
  }
  const unixHome = env.HOME || home;
  if (env.XDG_CONFIG_HOME) return posix.join(env.XDG_CONFIG_HOME, "burrow");
  if (platform === "darwin") return posix.join(unixHome, "Library", "Application Support", "burrow");
  return posix.join(unixHome, ".config", "burrow");
}

export function configFile(env: Env = process.env, platform: NodeJS.Platform = process.platform, home: string = homedir()): string {
  const dir = configDir(env, platform, home);
  return platform === "win32" ? win32.join(dir, "config.json") : posix.join(dir, "config.json");
}
