/**
 * The agent as a launchd job on macOS: a LaunchAgent of the user's
 * (`--user`, in ~/Library/LaunchAgents) or a LaunchDaemon of the system's
 * (/Library/LaunchDaemons, run as root). An XML property list
 * (launchd.plist(5)), every string escaped; pure text.
 */
import { agentArgs, WRITTEN_BY, type AgentServiceSpec } from "./agent-service.ts";

/**
 * launchd starts a job again at most this often (seconds), whatever made
 * it stop; it has no growing delay. The agent retries a lost connection
 * itself and exits only on a refusal it cannot get past.
 */
export const LAUNCHD_THROTTLE_S = 10;
/** umask 077 as launchd takes it: a decimal integer. */
const UMASK_077 = 0o077;

const escape = (text: string) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const string = (text: string) => `<string>${escape(text)}</string>`;

export interface LaunchdOptions {
  /** Where the agent's lines go (its standard output and error). */
  logFile: string;
  /** A LaunchAgent of the user's, else a LaunchDaemon. */
  user: boolean;
}

export function renderPlist(spec: AgentServiceSpec, o: LaunchdOptions): string {
  const args = [spec.binary, ...agentArgs(spec)];
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    // no "--" in an XML comment: the flag is named in words
    `<!-- ${WRITTEN_BY}; \`burrow service uninstall\`${o.user ? " (for this user)" : ""} removes it. -->`,
    '<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">',
    '<plist version="1.0">',
    "<dict>",
    "  <key>Label</key>",
    `  ${string(spec.name)}`,
    "  <key>ProgramArguments</key>",
    "  <array>",
    ...args.map((a) => `    ${string(a)}`),
    "  </array>",
    "  <key>RunAtLoad</key>",
    "  <true/>",
    "  <!-- started again when it exits with an error, not when it was stopped -->",
    "  <key>KeepAlive</key>",
    "  <dict>",
    "    <key>SuccessfulExit</key>",
    "    <false/>",
    "  </dict>",
    "  <key>ThrottleInterval</key>",
    `  <integer>${LAUNCHD_THROTTLE_S}</integer>`,
    "  <key>ProcessType</key>",
    "  <string>Background</string>",
    "  <key>Umask</key>",
    `  <integer>${UMASK_077}</integer>`,
    "  <key>StandardOutPath</key>",
    `  ${string(o.logFile)}`,
    "  <key>StandardErrorPath</key>",
    `  ${string(o.logFile)}`,
    "</dict>",
    "</plist>",
    "",
  ].join("\n");
}
