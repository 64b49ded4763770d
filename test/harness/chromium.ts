/**
 * The browser the panel tests drive: BURROW_CHROMIUM, else an installed
 * Chromium, Chrome or Edge where each platform puts it, else (Debian or
 * Ubuntu, as root or with password-less sudo) Debian's chromium package,
 * installed once with apt-get, as .ci/run does. So `npm ci && npm test`
 * passes on a fresh machine with nothing installed by hand.
 */
import { existsSync } from "node:fs";
import { aptInstall } from "./debian-packages.ts";

const CANDIDATES: Partial<Record<NodeJS.Platform, string[]>> = {
  linux: ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome", "/usr/bin/google-chrome-stable", "/usr/bin/microsoft-edge", "/snap/bin/chromium"],
  darwin: [
    "/Applications/Chromium.app/Contents/MacOS/Chromium",
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome",
    "/Applications/Microsoft Edge.app/Contents/MacOS/Microsoft Edge",
  ],
  win32: [
    `${process.env["PROGRAMFILES"] ?? "C:\\Program Files"}\\Google\\Chrome\\Application\\chrome.exe`,
    `${process.env["PROGRAMFILES(X86)"] ?? "C:\\Program Files (x86)"}\\Microsoft\\Edge\\Application\\msedge.exe`,
    `${process.env["LOCALAPPDATA"] ?? ""}\\Chromium\\Application\\chrome.exe`,
  ],
};

function installed(): string | undefined {
  if (process.env.BURROW_CHROMIUM) return process.env.BURROW_CHROMIUM;
  return (CANDIDATES[process.platform] ?? []).find((p) => existsSync(p));
}

function aptInstallChromium(): boolean {
  return aptInstall(["chromium"], "panel tests: no Chromium found");
}

let found: string | undefined | null = null;

/** The browser to drive, installing Debian's chromium the first time if need be; undefined when there is none. */
export function chromiumPath(): string | undefined {
  if (found !== null) return found;
  found = installed() ?? (aptInstallChromium() ? installed() : undefined);
  return found;
}
