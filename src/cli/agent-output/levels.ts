/**
 * How much the agent says in lines and JSON (--log-level). Each event has
 * one level: round trips and arriving streams are debug, what happens to
 * the tunnels (requests, connections, sessions) is info, losing the server
 * is warn, refusals are error. The live screen shows everything.
 */
export const LOG_LEVELS = ["debug", "info", "warn", "error"] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_LOG_LEVEL: LogLevel = "info";

const RANK: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Whether an event of `level` is shown when the threshold is `threshold`. */
export function shown(level: LogLevel, threshold: LogLevel): boolean {
  return RANK[level] >= RANK[threshold];
}

export function isLogLevel(value: string): value is LogLevel {
  return (LOG_LEVELS as readonly string[]).includes(value);
}
