/**
 * One line per event: time, level, message, then the event's fields. Text
 * (the default) is `time level message key=value ...`; JSON (--log-format
 * json) is one object per line with `time`, `level`, `msg` and the fields,
 * for log shippers. Either way secrets never reach a line: fields named like
 * one (token, password, cookie, authorization, secret, key) lose their text
 * value, and a token secret or a Bearer credential inside any text is cut out
 * (log-redact.ts). Numbers pass: `token=5` is a token's id.
 */
import { redactField } from "./log-redact.ts";

type Fields = Record<string, unknown>;
export type LogFormat = "text" | "json";
export const LOG_FORMATS: readonly LogFormat[] = ["text", "json"];

let current: LogFormat = "text";

/** Chosen once at start (burrow server --log-format); lines before that are text. */
export function setLogFormat(format: LogFormat): void {
  current = format;
}

export function logFormat(): LogFormat {
  return current;
}

/** What a field's value becomes in a line: an Error's message, the rest as it is. */
const plain = (v: unknown): unknown => (v instanceof Error ? v.message : v);

/** Keys a field may not take over in a JSON line. */
const RESERVED = new Set(["time", "level", "msg"]);

function formatText(level: string, msg: string, fields: Fields): string {
  const parts = [new Date().toISOString(), level, redactField("msg", msg) as string];
  for (const [k, raw] of Object.entries(fields)) {
    if (raw === undefined) continue;
    const v = redactField(k, plain(raw));
    const text = typeof v === "string" ? v : JSON.stringify(v);
    parts.push(`${k}=${/[\s"=]/.test(text) ? JSON.stringify(text) : text}`);
  }
  return parts.join(" ");
}

function formatJson(level: string, msg: string, fields: Fields): string {
  const line: Record<string, unknown> = { time: new Date().toISOString(), level, msg: redactField("msg", msg) };
  for (const [k, raw] of Object.entries(fields)) {
    if (raw === undefined) continue;
    line[RESERVED.has(k) ? `${k}_` : k] = redactField(k, plain(raw));
  }
  return JSON.stringify(line);
}

export function formatLine(level: string, msg: string, fields: Fields, format: LogFormat = current): string {
  return format === "json" ? formatJson(level, msg, fields) : formatText(level, msg, fields);
}

export const log = {
  info: (msg: string, fields: Fields = {}) => console.log(formatLine("info", msg, fields)),
  warn: (msg: string, fields: Fields = {}) => console.warn(formatLine("warn", msg, fields)),
  error: (msg: string, fields: Fields = {}) => console.error(formatLine("error", msg, fields)),
};

/**
 * Info lines for faults that anyone on the internet can cause (a bad Host,
 * a malformed frame): at most `perMinute` a minute, so that a flood of them
 * costs the operator a line a minute, not a full disk. The first line after
 * a quiet spell says how many were left out.
 */
export function limitedLog(perMinute: number, now: () => number = Date.now) {
  let windowStart = 0;
  let written = 0;
  let dropped = 0;
  return (msg: string, fields: Fields = {}): void => {
    const t = now();
    if (t - windowStart >= 60_000) {
      if (dropped > 0) log.info("client faults not logged", { count: dropped, per_minute: perMinute });
      windowStart = t;
      written = 0;
      dropped = 0;
    }
    if (written >= perMinute) {
      dropped++;
      return;
    }
    written++;
    log.info(msg, fields);
  };
}

/**
 * Warnings about a condition that lasts (a database out of reach): per
 * `key`, one line every `quietMs` at most, the next one saying how many
 * were left out meanwhile, so an outage costs a line every few seconds
 * rather than one per request or per heartbeat. `level` "error" for a
 * failure that may repeat as often but is a fault, not an outage (a
 * security record not written).
 */
export function quietWarnings(quietMs: number, now: () => number = Date.now, level: "warn" | "error" = "warn") {
  const last = new Map<string, { at: number; since: number }>();
  return (key: string, msg: string, fields: Fields = {}): void => {
    const t = now();
    const seen = last.get(key);
    if (seen && t - seen.at < quietMs) return void seen.since++;
    last.set(key, { at: t, since: 0 });
    log[level](msg, { ...fields, ...(seen?.since ? { not_logged_since: seen.since } : {}) });
  };
}

/**
 * A bug's stack trace: in text, its own lines after the line that said what
 * failed (as a reader wants it); in JSON, one more line with the stack as a
 * field, so that every line stays one object.
 */
export function logStack(err: unknown): void {
  const stack = err instanceof Error ? (err.stack ?? err.message) : String(err);
  if (current === "json") console.error(formatLine("error", "stack trace", { stack }));
  else console.error(stack);
}
