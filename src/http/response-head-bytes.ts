/**
 * A response head read for its framing straight from its bytes, without a
 * string: what the edge and the agent do with every response they pass on
 * as it came (the status, whether the connection stays open, where the
 * body ends). Only the common, well-formed head is read here: anything it
 * does not fully understand (a fault, repeated or listed framing fields,
 * another coding) is left to parseHead (response-head.ts), which reads it
 * as text, decides exactly as always and says what is wrong. So this is a
 * shortcut with the same answers, never a second set of rules.
 */
import type { ParsedHead } from "./response-head.ts";

/** A name's bytes: 1 for a tchar (RFC 9110 §5.6.2), 2 for the colon that ends it, 0 for anything else (request-head-bytes.ts reads them too). */
export const NAME = new Uint8Array(256);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") NAME[c.charCodeAt(0)] = 1;
NAME[0x3a] = 2;
/** A value's bytes: 0 for what a value may hold (visible, SP, HTAB, obs-text), 1 for the CR that ends it, 2 for any other control. */
export const VALUE = new Uint8Array(256);
for (let c = 0; c < 256; c++) VALUE[c] = (c < 0x20 && c !== 0x09) || c === 0x7f ? 2 : 0;
VALUE[0x0d] = 1;

const MAX_FIELDS = 1000;
const MAX_NAME = 256;
const CR = 0x0d;
const SP = 0x20;
const HTAB = 0x09;
/** A lean head keeps no fields (parseHead's lean heads keep only the framing ones, which nobody reads). */
const NO_FIELDS: [string, string][] = [];

/** Whether b[from, from + lower.length) is `lower` (ASCII, lower-case) in any case. */
function sameName(b: Uint8Array, from: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) {
    const c = b[from + i]!;
    const want = lower.charCodeAt(i);
    if (c !== want && (c | 0x20) !== want) return false;
  }
  return true;
}

/**
 * The head in `b` from `from` to `to` (its bytes, the blank line included;
 * by default all of `b`), read for its framing; undefined when parseHead
 * must read it instead.
 */
export function framingOf(b: Uint8Array, requestMethod: string, from = 0, to = b.length): ParsedHead | undefined {
  const end = to - 4; // the head without its blank line ends here
  const s = from;
  // "HTTP/1.x NNN" and an optional " reason"
  if (end - s < 12 || b[s] !== 0x48 || b[s + 1] !== 0x54 || b[s + 2] !== 0x54 || b[s + 3] !== 0x50 || b[s + 4] !== 0x2f || b[s + 5] !== 0x31 || b[s + 6] !== 0x2e) return undefined;
  const minor = b[s + 7]! - 0x30;
  if ((minor !== 0 && minor !== 1) || b[s + 8] !== SP) return undefined;
  const d1 = b[s + 9]! - 0x30;
  const d2 = b[s + 10]! - 0x30;
  const d3 = b[s + 11]! - 0x30;
  if (d1 < 1 || d1 > 9 || d2 < 0 || d2 > 9 || d3 < 0 || d3 > 9) return undefined;
  const status = d1 * 100 + d2 * 10 + d3;
  let at = s + 12;
  if (b[at] === SP) {
    for (at++; at < end && b[at] !== CR; at++) {
      const c = b[at]!;
      if ((c < SP && c !== HTAB) || c === 0x7f) return undefined;
    }
  }
  if (b[at] !== CR || b[at + 1] !== 0x0a) return undefined;
  at += 2;

  let length = -1;
  let chunked = false;
  let connectionSeen = false;
  let close = false;
  let keepAliveToken = false;
  let fields = 0;
  while (at < end) {
    if (++fields > MAX_FIELDS) return undefined;
    // the name: a token, then the colon (a table read a byte: every head's every byte passes here; the
    // head ends in CR LF CR LF, so neither scan runs past it)
    let colon = at;
    let kind: number;
    while ((kind = NAME[b[colon]!]!) === 1) colon++;
    const nameLength = colon - at;
    if (kind !== 2 || colon >= end || nameLength === 0 || nameLength > MAX_NAME) return undefined;
    // the value: up to CR, without the whitespace around it, no controls but HTAB
    let lineEnd = colon + 1;
    while ((kind = VALUE[b[lineEnd]!]!) === 0) lineEnd++;
    if (kind !== 1 || lineEnd > end) return undefined;
    if (lineEnd < end && b[lineEnd + 1] !== 0x0a) return undefined;
    let from = colon + 1;
    let to = lineEnd;
    while (from < to && (b[from] === SP || b[from] === HTAB)) from++;
    while (to > from && (b[to - 1] === SP || b[to - 1] === HTAB)) to--;
    if (nameLength === 14 && sameName(b, at, "content-length")) {
      if (length >= 0 || to === from || to - from > 15) return undefined;
      let n = 0;
      for (let i = from; i < to; i++) {
        const d = b[i]! - 0x30;
        if (d < 0 || d > 9) return undefined;
        n = n * 10 + d;
      }
      length = n;
    } else if (nameLength === 17 && sameName(b, at, "transfer-encoding")) {
      if (chunked || to - from !== 7 || !sameName(b, from, "chunked")) return undefined;
      chunked = true;
    } else if (nameLength === 10 && sameName(b, at, "connection")) {
      if (connectionSeen) return undefined;
      connectionSeen = true;
      for (let i = from; i < to; i++) if (b[i] === 0x2c) return undefined; // a list: parseHead reads it
      if (to - from === 5 && sameName(b, from, "close")) close = true;
      else if (to - from === 10 && sameName(b, from, "keep-alive")) keepAliveToken = true;
    }
    at = lineEnd + 2;
  }

  let keepAlive = minor === 0 ? keepAliveToken : !close;
  let framing: ParsedHead["framing"];
  if (requestMethod === "HEAD" || status < 200 || status === 204 || status === 304) {
    framing = "none";
    if (status === 101) keepAlive = false; // the connection now speaks another protocol
  } else if (chunked) {
    framing = "chunked";
    if (length >= 0) keepAlive = false; // both: read by chunks, then close (RFC 9112 §6.3)
  } else if (length >= 0) {
    framing = "length";
  } else {
    framing = "close";
    keepAlive = false;
  }
  return { status, reason: "", minor: minor as 0 | 1, headers: NO_FIELDS, framing, length: framing === "length" ? length : 0, keepAlive };
}
