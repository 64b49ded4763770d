/** One line per event: time, level, message, then key=value fields. */
type Fields = Record<string, unknown>;

function format(level: string, msg: string, fields: Fields): string {
  const parts = [new Date().toISOString(), level, msg];
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    const text = v instanceof Error ? v.message : typeof v === "string" ? v : JSON.stringify(v);
    parts.push(`${k}=${/[\s"=]/.test(text) ? JSON.stringify(text) : text}`);
  }
  return parts.join(" ");
}

export const log = {
  info: (msg: string, fields: Fields = {}) => console.log(format("info", msg, fields)),
  warn: (msg: string, fields: Fields = {}) => console.warn(format("warn", msg, fields)),
  error: (msg: string, fields: Fields = {}) => console.error(format("error", msg, fields)),
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
