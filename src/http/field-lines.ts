/**
 * The header section of a head, read line by line with character tables
 * rather than a split and a regular expression per line: every request
 * passes through here twice (the edge's request head, the agent's response
 * head, and each other's), so this is on the path whose cost per request is
 * measured. The rules are RFC 9112 §5: a name is a token, directly followed
 * by a colon (whitespace before it, or a line that starts with whitespace,
 * which is obsolete folding, is a fault); a value is visible bytes, spaces,
 * tabs and obs-text, without the whitespace around it.
 */
import { isEdgeSetFieldAt } from "./burrow-fields.ts";

/** tchar (RFC 9110 §5.6.2), by character code below 128. */
const TCHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") TCHAR[c.charCodeAt(0)] = 1;

/** Whether text[from, to) is a token (and not empty). */
export function isToken(text: string, from: number, to: number): boolean {
  if (to <= from) return false;
  for (let i = from; i < to; i++) {
    const c = text.charCodeAt(i);
    if (c >= 128 || TCHAR[c] === 0) return false;
  }
  return true;
}

/** Why a header line cannot be read; the line is not quoted (it may hold anything). */
export type FieldFault = "line" | "name" | "long-name" | "value" | "too-many";

/** Told each field: an object with a method rather than a callback, so a parse makes no closure. */
export interface FieldVisitor {
  /** A field, its name as sent and its value trimmed; `lower` is the name in lower case. */
  field(name: string, lower: string, value: string): void;
}

/**
 * Reads the header lines of `text` after `start` (the index just past the
 * first line's CRLF, or text.length when there are none), calling `visit`
 * for each field in order. Returns a fault, or undefined when every line
 * was read. With `only` (lengths of the names the caller reads), the other
 * fields are checked but not handed over, and cost no strings; with
 * `edgeSet` too, the fields the edge always takes out (burrow-fields.ts:
 * X-Burrow-* in any spelling, X-Real-IP, Forwarded) are handed over
 * whatever their length, for the reader that takes them out.
 */
export function readFields(text: string, start: number, maxFields: number, maxName: number, visit: FieldVisitor, only?: ReadonlySet<number>, edgeSet = false): FieldFault | undefined {
  let at = start;
  let count = 0;
  const end = text.length;
  while (at < end) {
    let lineEnd = text.indexOf("\r\n", at);
    if (lineEnd < 0) lineEnd = end;
    if (++count > maxFields) return "too-many";
    const colon = text.indexOf(":", at);
    // no colon on this line, or it starts the line: no name
    if (colon < 0 || colon >= lineEnd || colon === at) return "line";
    if (!isToken(text, at, colon)) return "name";
    if (colon - at > maxName) return "long-name";
    let from = colon + 1;
    let to = lineEnd;
    while (from < to && (text.charCodeAt(from) === 0x20 || text.charCodeAt(from) === 0x09)) from++;
    while (to > from && (text.charCodeAt(to - 1) === 0x20 || text.charCodeAt(to - 1) === 0x09)) to--;
    for (let i = from; i < to; i++) {
      const c = text.charCodeAt(i);
      // controls other than HTAB (CR and LF included), DEL; nothing past 0xff comes from latin1
      if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return "value";
    }
    if (only === undefined || only.has(colon - at) || (edgeSet && isEdgeSetFieldAt(text, at, colon))) {
      const name = text.slice(at, colon);
      visit.field(name, name.toLowerCase(), text.slice(from, to));
    }
    at = lineEnd + 2;
  }
  return undefined;
}

/**
 * Whether the comma-separated `list` (Connection values joined by commas,
 * lower-cased) holds `token`, its items trimmed: read in place, without a
 * split, since every head with a Connection field asks.
 */
export function listHas(list: string, token: string): boolean {
  let at = 0;
  while (at <= list.length) {
    let end = list.indexOf(",", at);
    if (end < 0) end = list.length;
    let from = at;
    let to = end;
    while (from < to && (list.charCodeAt(from) === 0x20 || list.charCodeAt(from) === 0x09)) from++;
    while (to > from && (list.charCodeAt(to - 1) === 0x20 || list.charCodeAt(to - 1) === 0x09)) to--;
    if (to - from === token.length && list.startsWith(token, from)) return true;
    at = end + 1;
  }
  return false;
}

/**
 * Adds a comma-separated field value's items to `list`, trimmed (`dropEmpty`:
 * without empty ones). A value of one item, the usual case, costs no split.
 */
export function pushList(list: string[], value: string, dropEmpty = false): void {
  if (value.indexOf(",") < 0) {
    if (!dropEmpty || value !== "") list.push(value);
    return;
  }
  for (const item of value.split(",")) {
    const trimmed = item.trim();
    if (!dropEmpty || trimmed !== "") list.push(trimmed);
  }
}
