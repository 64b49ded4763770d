/**
 * What the platform's service manager is told, after the files are
 * written or before they are removed: systemctl, launchctl, or (Windows)
 * the WinSW commands, which the command says rather than runs. Each step
 * is a command line, run here on the service's own platform, or printed
 * for the person to run (--root, --no-start, another platform).
 */
import { win32 } from "node:path";
import { thisPlatform } from "./agent-service.ts";
import { shellWord } from "../server-init-report.ts";
import type { ServiceTarget } from "./service-plan.ts";
import { quoteWindowsWord } from "./winsw-xml.ts";

export interface Step {
  cmd: string[];
  /** A failure of this step does not stop the next ones (a service already stopped, say). */
  mayFail?: boolean;
}

const systemctl = (t: ServiceTarget, ...args: string[]) => ["systemctl", ...(t.user ? ["--user"] : []), ...args];
const launchDomain = (t: ServiceTarget) => (t.user ? `gui/${process.getuid?.() ?? 501}` : "system");

/** After install: load the new file, and start the service now and at each boot (or sign-in). */
export function startSteps(t: ServiceTarget): Step[] {
  switch (t.platform) {
    case "linux":
      return [{ cmd: systemctl(t, "daemon-reload") }, { cmd: systemctl(t, "enable", t.paths.unitName) }, { cmd: systemctl(t, "restart", t.paths.unitName) }];
    case "macos":
      // a job loaded before (a reinstall) goes first: bootstrap refuses a label that is loaded
      return [{ cmd: ["launchctl", "bootout", `${launchDomain(t)}/${t.paths.unitName}`], mayFail: true }, { cmd: ["launchctl", "bootstrap", launchDomain(t), t.paths.service] }];
    case "windows": {
      const exe = win32.join(win32.dirname(t.paths.service), `${t.name}.exe`);
      return [
        // the token file: the service (LocalSystem) and administrators only, nothing inherited
        { cmd: ["icacls", t.paths.token, "/inheritance:r", "/grant:r", "SYSTEM:F", "/grant:r", "Administrators:F"] },
        { cmd: [exe, "install"] },
        { cmd: [exe, "start"] },
      ];
    }
  }
}

/** Before uninstall: stop the service and keep it from starting again. */
export function stopSteps(t: ServiceTarget): Step[] {
  switch (t.platform) {
    case "linux":
      return [{ cmd: systemctl(t, "disable", "--now", t.paths.unitName), mayFail: true }];
    case "macos":
      return [{ cmd: ["launchctl", "bootout", `${launchDomain(t)}/${t.paths.unitName}`], mayFail: true }];
    case "windows": {
      const exe = win32.join(win32.dirname(t.paths.service), `${t.name}.exe`);
      return [{ cmd: [exe, "stop"], mayFail: true }, { cmd: [exe, "uninstall"], mayFail: true }];
    }
  }
}

/** After uninstall: the manager forgets the removed file. */
export function forgetSteps(t: ServiceTarget): Step[] {
  return t.platform === "linux" ? [{ cmd: systemctl(t, "daemon-reload"), mayFail: true }] : [];
}

/** A step as a line to paste into a shell: a POSIX one, or on Windows its command prompt. */
export const stepLine = (s: Step, platform: ServiceTarget["platform"] = "linux") => s.cmd.map(platform === "windows" ? quoteWindowsWord : shellWord).join(" ");

/** Runs the steps in order; returns the first failure that counts, as a sentence, or undefined. */
export function runSteps(steps: Step[]): string | undefined {
  for (const step of steps) {
    if (!Bun.which(step.cmd[0]!)) {
      if (step.mayFail) continue;
      return `${step.cmd[0]} is not on this machine's PATH: run  ${stepLine(step, thisPlatform() ?? "linux")}  where it is`;
    }
    const p = Bun.spawnSync(step.cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
    if (p.exitCode !== 0 && !step.mayFail) return `${stepLine(step, thisPlatform() ?? "linux")} failed (exit ${p.exitCode}): ${p.stderr.toString().trim().slice(0, 500)}`;
  }
  return undefined;
}
