/**
 * Which output the agent uses (--log) and how much it says (--log-level):
 * the live screen for a person at a terminal, lines otherwise, JSON lines
 * for scripts. The choice is made once, before the agent connects.
 */
import type { AgentOutput } from "../../agent/output.ts";
import { UsageError } from "../../usage-error.ts";
import { jsonOutput } from "./json.ts";
import { DEFAULT_LOG_LEVEL, isLogLevel, LOG_LEVELS, type LogLevel } from "./levels.ts";
import { lineOutput } from "./lines.ts";
import { flushLines } from "./print.ts";
import { screenOutput } from "./screen.ts";
import type { OutputHandle } from "./handle.ts";

export type { OutputHandle };

export const LOG_FORMATS = ["screen", "text", "json"] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];


export interface OutputChoice {
  format: LogFormat;
  level: LogLevel;
}

/**
 * --log and --log-level as given (undefined: not given). The screen is
 * the default on a terminal that can show it (not TERM=dumb); asked for
 * where stdout is not a terminal (a pipe, a file, systemd), it is lines:
 * there is no screen to draw on, and a unit file copied from a terminal
 * session must still run.
 */
export function chooseOutput(
  flags: { log?: string; logLevel?: string },
  stdout: { isTTY?: boolean },
  env: Record<string, string | undefined> = process.env,
): OutputChoice {
  const { log, logLevel } = flags;
  if (log !== undefined && !(LOG_FORMATS as readonly string[]).includes(log)) {
    throw new UsageError(`--log must be one of ${LOG_FORMATS.join(", ")} (got '${log}')`);
  }
  if (logLevel !== undefined && !isLogLevel(logLevel)) {
    throw new UsageError(`--log-level must be one of ${LOG_LEVELS.join(", ")} (got '${logLevel}')`);
  }
  const terminal = Boolean(stdout.isTTY) && env.TERM !== "dumb";
  const wanted = (log as LogFormat | undefined) ?? "screen";
  return { format: wanted === "screen" && !terminal ? "text" : wanted, level: (logLevel as LogLevel | undefined) ?? DEFAULT_LOG_LEVEL };
}

/** `server`: where the agent connects, for the screen to show before the first session. */
export function openOutput(choice: OutputChoice, server?: string): OutputHandle {
  if (choice.format === "screen") return screenOutput(undefined, server);
  const events = choice.format === "json" ? jsonOutput(choice.level) : lineOutput(choice.level);
  return { ...events, finish: async () => flushLines() };
}
