/**
 * A request's path in its one normal form, as nginx and Envoy make it
 * before they route: the form path routes match, the access rules and the
 * edge's own paths judge, and the local service is sent. Without it a
 * route for /api takes `/api/../secret` (or `/api/%2e%2e/secret`), which
 * the service behind resolves to /secret.
 *
 * Made normal: percent-encoded unreserved characters (RFC 3986 §2.3:
 * letters, digits, `-._~`) decoded and every other escape's hex digits
 * upper-cased (§6.2.2.1-2), slashes merged, then dot segments removed
 * (§5.2.4; `/../x` is `/x`: nothing climbs above the root). The query goes
 * on as it was sent.
 *
 * Refused, since no one form says what every server behind reads in it:
 * an encoded `/` or `\` (%2F, %5C: one server splits segments there,
 * another does not), a raw `\` (a slash to some), NUL (raw or %00), a '%'
 * that starts no escape (decoders differ on it), a '#' (no client sends a
 * fragment; a server behind would cut the path there, `/api/..#x` being
 * `/api/..` to it), and a segment that is a dot segment only once decoded
 * (`%2e`, `.%2E`) or once its parameters are cut (`..;x`, as Tomcat and
 * Jetty read it).
 *
 * Shared by the edge and the agent (which makes a path normal again: an
 * older server, or a private tunnel's connector, sends it as it came).
 * Most paths are already normal: one scan, no allocation, the same string.
 */

/** Why a path cannot be made normal, in words for the sender (never echoes it). */
export interface PathRefusal {
  why: string;
}

const SLASH = 0x2f;
const DOT = 0x2e;
const PERCENT = 0x25;
const BACKSLASH = 0x5c;
const QUESTION = 0x3f;
const SEMICOLON = 0x3b;
const HASH = 0x23;

const ENCODED_SLASH: PathRefusal = { why: "The request path holds an encoded slash or backslash (%2F, %5C)." };
const RAW_BACKSLASH: PathRefusal = { why: "The request path holds a backslash." };
const NUL: PathRefusal = { why: "The request path holds a NUL byte." };
const BAD_ESCAPE: PathRefusal = { why: "The request path holds a '%' that starts no percent-encoded byte." };
const HIDDEN_DOTS: PathRefusal = { why: "The request path holds a dot segment in disguise (an encoded dot, or '..;')." };
const FRAGMENT: PathRefusal = { why: "The request path holds a '#' (a fragment is never sent to a server)." };

/** The value of a hex digit, or -1; `upper`: only 0-9 and A-F count. */
function hexValue(c: number, upper: boolean): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  if (c >= 0x41 && c <= 0x46) return c - 0x37;
  if (!upper && c >= 0x61 && c <= 0x66) return c - 0x57;
  return -1;
}

/** RFC 3986 §2.3: ALPHA DIGIT - . _ ~ */
function unreserved(b: number): boolean {
  return (b >= 0x41 && b <= 0x5a) || (b >= 0x61 && b <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x2d || b === DOT || b === 0x5f || b === 0x7e;
}

/** A byte that no escape may stand for. */
function refusedByte(b: number): PathRefusal | undefined {
  if (b === SLASH || b === BACKSLASH) return ENCODED_SLASH;
  if (b === 0) return NUL;
  return undefined;
}

/** Upper-case hex digits' values by character code, -1 for anything else (the fast scan's table). */
const UPPER_HEX = new Int8Array(128).fill(-1);
/** 1 for a byte whose escape stays as it is: neither decoded (unreserved) nor refused. */
const KEPT_BYTE = new Uint8Array(256);
for (let c = 0; c < 128; c++) UPPER_HEX[c] = hexValue(c, true);
for (let b = 0; b < 256; b++) KEPT_BYTE[b] = unreserved(b) || refusedByte(b) !== undefined ? 0 : 1;

/** Whether the escape at `i` ('%') stays as it is: upper-case hex, of a byte that is neither decoded nor refused. */
function keptEscape(path: string, i: number): boolean {
  // two table reads rather than the checks above: most escapes in paths are UTF-8 bytes, kept
  const hi = UPPER_HEX[path.charCodeAt(i + 1) & 0x7f]!;
  const lo = UPPER_HEX[path.charCodeAt(i + 2) & 0x7f]!;
  return hi >= 0 && lo >= 0 && path.charCodeAt(i + 2) < 0x80 && path.charCodeAt(i + 1) < 0x80 && KEPT_BYTE[hi * 16 + lo] === 1;
}

/** Whether a segment that starts with '.' at `i` is "." or ".." (or one with parameters), up to its end. */
function dotSegmentAt(path: string, i: number): boolean {
  let end = i + 1;
  if (path.charCodeAt(end) === DOT) end++;
  const c = path.charCodeAt(end); // NaN past the end
  return end === path.length || c === SLASH || c === QUESTION || c === SEMICOLON;
}

/**
 * The normal form of an origin-form target ("/path?query"): the same
 * string when it is already normal, or why it cannot be made so.
 */
export function normalTarget(target: string): string | PathRefusal {
  for (let i = 0; i < target.length; i++) {
    const c = target.charCodeAt(i);
    // letters and most of the rest come past '?': one comparison for them
    if (c > QUESTION) {
      if (c === BACKSLASH) return rewrite(target);
    } else if (c === SLASH) {
      const next = target.charCodeAt(i + 1);
      if (next === SLASH || (next === DOT && dotSegmentAt(target, i + 1))) return rewrite(target);
    } else if (c === PERCENT) {
      if (!keptEscape(target, i)) return rewrite(target);
      i += 2;
    } else if (c === QUESTION) break;
    else if (c === 0 || c === HASH) return rewrite(target);
  }
  return target;
}

/** A segment's escapes made normal, or why they cannot be. */
function decodeSegment(raw: string): string | PathRefusal {
  if (raw.indexOf("%") < 0 && raw.indexOf("\\") < 0 && raw.indexOf("\0") < 0 && raw.indexOf("#") < 0) return raw;
  let out = "";
  for (let i = 0; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c === BACKSLASH) return RAW_BACKSLASH;
    if (c === 0) return NUL;
    if (c === HASH) return FRAGMENT;
    if (c !== PERCENT) {
      out += raw[i];
      continue;
    }
    const hi = hexValue(raw.charCodeAt(i + 1), false);
    const lo = hexValue(raw.charCodeAt(i + 2), false);
    if (hi < 0 || lo < 0) return BAD_ESCAPE;
    const b = hi * 16 + lo;
    const refused = refusedByte(b);
    if (refused) return refused;
    out += unreserved(b) ? String.fromCharCode(b) : `%${raw.slice(i + 1, i + 3).toUpperCase()}`;
    i += 2;
  }
  return out;
}

/** A decoded segment that reads as "." or ".." to a server that decodes, or cuts parameters at ';'. */
function hiddenDots(segment: string): boolean {
  const semicolon = segment.indexOf(";");
  const name = semicolon < 0 ? segment : segment.slice(0, semicolon);
  return name === "." || name === "..";
}

/** The slow way, for a path that is not normal as it came: segment by segment. */
function rewrite(target: string): string | PathRefusal {
  const q = target.indexOf("?");
  const path = q < 0 ? target : target.slice(0, q);
  const kept: string[] = [];
  let trailingSlash = false;
  // the path starts with '/': each segment runs from after one slash to the next
  for (let start = 1; start <= path.length; ) {
    let end = path.indexOf("/", start);
    if (end < 0) end = path.length;
    const raw = path.slice(start, end);
    start = end + 1;
    // a segment that ends the path with nothing after it, a "." or a ".." leaves a directory: a trailing slash
    trailingSlash = raw === "" || raw === "." || raw === "..";
    if (raw === "" || raw === ".") continue; // a merged slash, or "this directory"
    if (raw === "..") {
      kept.pop(); // never above the root
      continue;
    }
    const segment = decodeSegment(raw);
    if (typeof segment !== "string") return segment;
    if (hiddenDots(segment)) return HIDDEN_DOTS;
    kept.push(segment);
  }
  const normal = kept.length === 0 ? "/" : `/${kept.join("/")}${trailingSlash ? "/" : ""}`;
  return q < 0 ? normal : normal + target.slice(q);
}
