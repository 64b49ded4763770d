/**
 * A request head read straight from its bytes, without making it a string:
 * what the edge does with every visitor's head and the agent with every
 * head a kept stream brings (the request line, the fields each reads, the
 * framing). Only the common, well-formed head is read here: a request line
 * in origin form, every header line plainly a token, a colon and a value
 * of visible bytes. Anything else (a fault, an absolute-form or `*`
 * target, a version not spoken, more fields than allowed) is left to
 * parseRequestHead (request-head.ts), which reads it as text, decides
 * exactly as always and says what is wrong. The fields it reads go to the
 * same visitor, and the rules that read them together are the same
 * function (headFrom): a shortcut with the same answers, never a second
 * set of rules.
 *
 * A head read here holds no LF that is not after a CR: the reader of its
 * bytes (head-reader.ts, `decode` false) need not search it for one.
 */
import { isEdgeSetFieldIn } from "./burrow-fields.ts";
import { normalTarget } from "./request-path.ts";
import { headFrom, isRefusal, MAX_NAME_LENGTH, OWN_NAMES, requestFields, withOwnNames, type RequestHead } from "./request-head.ts";
import { NAME, VALUE } from "./response-head-bytes.ts";


const CR = 0x0d;
const LF = 0x0a;
const SP = 0x20;
const HTAB = 0x09;

/** The common methods, made once: a head with one of them costs no string for it. */
const METHODS = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/** The names the parser itself reads (request-head.ts RequestFields), in lower case, by length. */
const OWN_BY_LENGTH: (string | undefined)[] = [];
for (const name of ["host", "expect", "upgrade", "connection", "content-length", "transfer-encoding"]) OWN_BY_LENGTH[name.length] = name;

/** A set of name lengths as a table by length (a byte each, names up to MAX_NAME_LENGTH). */
function lengthTable(lengths: ReadonlySet<number>): Uint8Array {
  const table = new Uint8Array(MAX_NAME_LENGTH + 1);
  for (const n of lengths) if (n <= MAX_NAME_LENGTH) table[n] = 1;
  return table;
}

/** The parser's own names' lengths, as a table. */
const OWN_TABLE = lengthTable(OWN_NAMES);
/** The last caller's lengths and their union with the parser's own, as a table (one caller's set, the edge's, is asked every request). */
let lastLengths: ReadonlySet<number> | undefined;
let lastUnion: Uint8Array = OWN_TABLE;

/** Whether b[from, from + lower.length) is `lower` (ASCII, lower case) in any case. */
function sameName(b: Uint8Array, from: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const c = b[from + i]!;
    const want = lower.charCodeAt(i);
    if (c !== want && (c | 0x20) !== want) return false;
  }
  return true;
}

/** b[from, to) as a string, one byte a character (as latin1 decodes a head). */
function latin1(b: Buffer, from: number, to: number): string {
  return b.toString("latin1", from, to);
}

/** Whether b[from, from + s.length) is `s`. */
function sameBytes(b: Buffer, from: number, s: string): boolean {
  for (let i = 0; i < s.length; i++) if (b[from + i] !== s.charCodeAt(i)) return false;
  return true;
}

/** The last Host read: the next head most often names the same one (every request of a connection does). */
let lastHost = "";

/** The Host's value at b[from, to): the last one again when it is the same bytes, without a new string. */
function hostOf(b: Buffer, from: number, to: number): string {
  if (to - from === lastHost.length && sameBytes(b, from, lastHost)) return lastHost;
  return (lastHost = latin1(b, from, to));
}

/** The last field name read of each length (up to 32): heads spell the same names the same way. */
const lastNames: string[] = new Array(33).fill("");

/** A field's name as sent, b[from, to): the last of its length again when it is the same bytes. */
function nameOf(b: Buffer, from: number, to: number): string {
  const length = to - from;
  if (length > 32) return latin1(b, from, to);
  const last = lastNames[length]!;
  if (last.length === length && sameBytes(b, from, last)) return last;
  return (lastNames[length] = latin1(b, from, to));
}

/** The method at b[0, end), a common one without a new string. */
function methodOf(b: Buffer, end: number): string {
  for (const m of METHODS) {
    if (m.length !== end) continue;
    let same = true;
    for (let i = 0; i < end; i++) if (b[i] !== m.charCodeAt(i)) same = false;
    if (same) return m;
  }
  return latin1(b, 0, end);
}

/**
 * The head in `b` (its bytes, the blank line included) as parseRequestHead
 * reads its text with `fields` and `maxFields`; undefined when that parser
 * must read it instead (anything but the common, well-formed head; any
 * refusal).
 */
export function requestHeadOf(bytes: Uint8Array, fields: boolean | ReadonlySet<number>, maxFields: number): RequestHead | undefined {
  const b = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const end = b.length - 4; // the head without its blank line ends here
  // method SP
  let at = 0;
  while (at < end && NAME[b[at]!] === 1) at++; // a token
  if (at === 0 || b[at] !== SP) return undefined;
  const methodEnd = at;
  // an origin-form target: visible ASCII from its slash to the SP
  const targetStart = ++at;
  if (b[at] !== 0x2f /* / */) return undefined;
  while (at < end && b[at]! > SP && b[at]! < 0x7f) at++;
  const targetEnd = at;
  // SP HTTP/1.0 or HTTP/1.1 CRLF
  if (at + 11 > end + 2 || b[at] !== SP || b[at + 1] !== 0x48 || b[at + 2] !== 0x54 || b[at + 3] !== 0x54 || b[at + 4] !== 0x50 || b[at + 5] !== 0x2f || b[at + 6] !== 0x31 || b[at + 7] !== 0x2e) return undefined;
  const minorDigit = b[at + 8]!;
  if ((minorDigit !== 0x30 && minorDigit !== 0x31) || b[at + 9] !== CR || b[at + 10] !== LF) return undefined;
  at += 11;

  const keeps = fields !== false;
  const some = fields !== true && fields !== false;
  // which fields are handed to the visitor: as readFields hands them (request-head.ts), by their names' lengths
  let only: Uint8Array | undefined;
  if (fields === true) only = undefined;
  else if (fields === false) only = OWN_TABLE;
  else if (fields === lastLengths) only = lastUnion;
  else only = lastUnion = lengthTable(withOwnNames((lastLengths = fields)));
  const seen = requestFields.start(keeps);
  let count = 0;
  // a field not handed on: the head's fields are not all in `fields` (everyField reads them when asked)
  let skipped = false;
  while (at < end + 2) {
    if (++count > maxFields) return undefined;
    // the name: a token, directly followed by the colon (a table read a byte, as framingOf reads a response's;
    // the head ends in CR LF CR LF, so neither scan runs past it)
    let colon = at;
    let kind: number;
    while ((kind = NAME[b[colon]!]!) === 1) colon++;
    const nameLength = colon - at;
    if (kind !== 2 || nameLength === 0 || nameLength > MAX_NAME_LENGTH) return undefined;
    // the value: up to CR LF, no controls but HTAB, without the whitespace around it
    let lineEnd = colon + 1;
    while ((kind = VALUE[b[lineEnd]!]!) === 0) lineEnd++;
    if (kind !== 1 || b[lineEnd + 1] !== LF) return undefined;
    if (only === undefined || only[nameLength] === 1 || (some && isEdgeSetFieldIn(b, at, colon))) {
      let from = colon + 1;
      let to = lineEnd;
      while (from < to && (b[from] === SP || b[from] === HTAB)) from++;
      while (to > from && (b[to - 1] === SP || b[to - 1] === HTAB)) to--;
      const own = nameLength < OWN_BY_LENGTH.length ? OWN_BY_LENGTH[nameLength] : undefined;
      const lower = own !== undefined && sameName(b, at, own) ? own : undefined;
      // a field kept for the caller has its name as sent; one read only by the parser needs none
      const name = keeps ? nameOf(b, at, colon) : lower;
      if (name !== undefined) seen.field(name, lower ?? name.toLowerCase(), lower === "host" ? hostOf(b, from, to) : latin1(b, from, to));
      else skipped = true;
    } else skipped = true;
    at = lineEnd + 2;
  }

  const sent = latin1(b, targetStart, targetEnd);
  // one path for every reader after this one, as parseRequestHead makes it (a path it refuses is its to refuse)
  const target = normalTarget(sent);
  if (typeof target !== "string") return undefined;
  const head = headFrom(seen, methodOf(b, methodEnd), target, sent, undefined, minorDigit === 0x30 ? 0 : 1, fields === true || (keeps && !skipped));
  return isRefusal(head) ? undefined : head;
}
