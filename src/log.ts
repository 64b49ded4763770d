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
