/**
 * One Server-Sent Events event rewritten by sse-find-replace's rules
 * (actions/sse-find-replace.ts), as the WHATWG event-stream format reads
 * it: lines ended by CRLF, LF or CR, a field's name before the first
 * colon and its value after it (one leading space dropped), and the event
 * ended by a blank line. `data` is the event's data lines joined by a line
 * feed, rewritten whole and written back as one data line a line of the
 * result; each `retry` line is rewritten on its own. Every other line (a
 * comment, `event`, `id`) stays as it came, and an event whose fields the
 * rules did not change is sent as the very bytes it came in.
 */
import { replaceAll } from "./actions/body-replace.ts";
import type { StreamReplacement } from "./message.ts";

/**
 * How much the rules may grow one event: to twice its size, or by this
 * many characters for a small one (a body's is MAX_GROWTH; an event is
 * small, and a stream has many).
 */
export const MAX_EVENT_GROWTH = 64 * 1024;

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });
const LINE = /\r\n|\r|\n/;

interface Line {
  text: string;
  /** Its line ending as it came ("" for a last line that had none). */
  end: string;
  /** Its field's name ("" for a comment: the line starts with a colon). */
  field: string;
  value: string;
}

function lines(text: string): Line[] {
  const out: Line[] = [];
  const ends = /\r\n|\r|\n/g;
  let at = 0;
  while (at < text.length) {
    ends.lastIndex = at;
    const m = ends.exec(text);
    const line = m ? text.slice(at, m.index) : text.slice(at);
    const end = m ? m[0] : "";
    at = m ? m.index + end.length : text.length;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    out.push({ text: line, end, field, value });
  }
  return out;
}

/**
 * The event (its bytes, its blank line included) with the rules applied:
 * the new bytes, "unchanged" when the rules change nothing (or it has no
 * field they rewrite), "not-utf8" when it is not UTF-8 text. Throws the
 * policy's ReplaceFailed when the rules take more than their steps, or
 * grow a field past MAX_EVENT_GROWTH.
 */
export function rewriteEvent(bytes: Uint8Array, rules: readonly StreamReplacement[]): Uint8Array | "unchanged" | "not-utf8" {
  let text: string;
  try {
    text = utf8.decode(bytes);
  } catch {
    return "not-utf8";
  }
  const all = lines(text);
  const data = all.filter((l) => l.field === "data");
  const dataRules = rules.filter((r) => r.field === "data");
  const retryRules = rules.filter((r) => r.field === "retry");
  let changed = false;
  let newData: string | undefined;
  if (data.length > 0 && dataRules.length > 0) {
    const joined = data.map((l) => l.value).join("\n");
    const out = replaceAll(joined, dataRules, MAX_EVENT_GROWTH, "event's data");
    if (out !== joined) {
      newData = out;
      changed = true;
    }
  }
  const retries = new Map<Line, string>();
  if (retryRules.length > 0) {
    for (const l of all) {
      if (l.field !== "retry") continue;
      // a line break would make lines of its own: a retry's value is one line
      const out = replaceAll(l.value, retryRules, MAX_EVENT_GROWTH, "event's retry").replace(/[\r\n]/g, "");
      if (out === l.value) continue;
      retries.set(l, out);
      changed = true;
    }
  }
  if (!changed) return "unchanged";
  let out = "";
  let dataWritten = false;
  for (const l of all) {
    if (l.field === "data" && newData !== undefined) {
      // the data's lines where its first line was
      if (dataWritten) continue;
      dataWritten = true;
      const eol = l.end || "\n";
      for (const part of newData.split(LINE)) out += `data: ${part}${eol}`;
      continue;
    }
    const retry = retries.get(l);
    out += retry !== undefined ? `retry: ${retry}${l.end}` : `${l.text}${l.end}`;
  }
  return Buffer.from(out, "utf8");
}
