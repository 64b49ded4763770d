/**
 * burrow's own request fields: `X-Burrow-` and what follows it, such as
 * X-Burrow-User (a private tunnel's connector, set by the owner's agent)
 * and X-Burrow-User-Email (the signed-in visitor, set by the edge). A
 * service believes them because only burrow sets them, so none a visitor
 * or a connector sends may reach it, in any spelling a server might read as
 * the same name: any case, and `_` for `-` (CGI-style servers, PHP, nginx
 * with underscores_in_headers, read X_Burrow_User as X-Burrow-User).
 */

/** The prefix, in lower case with dashes. */
const PREFIX = "x-burrow-";

/** Whether text[at, at + PREFIX.length) is the prefix, in any case, `_` for `-`. */
function prefixAt(text: string, at: number): boolean {
  for (let i = 0; i < PREFIX.length; i++) {
    const c = text.charCodeAt(at + i) | 0x20; // lower case; "-" (0x2d) and "_" (0x5f, 0x7f) stay apart from letters
    const want = PREFIX.charCodeAt(i);
    if (c !== want && !(want === 0x2d && c === 0x7f)) return false;
  }
  return true;
}

/** Whether a field name (in lower case) is one of burrow's, in any spelling. */
export function isBurrowField(lower: string): boolean {
  return lower.length > PREFIX.length && lower.charCodeAt(0) === 0x78 /* x */ && prefixAt(lower, 0);
}

/** Whether text[at, at + lower.length) is `lower` (ASCII) in any case. */
function nameAt(text: string, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if ((text.charCodeAt(at + i) | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

/**
 * Whether text[at, colon) names a field the edge always takes out of a
 * visitor's request, to set its own or none: one of burrow's (in any
 * spelling), X-Real-IP or Forwarded. For a reader that keeps only some
 * fields (by their names' lengths), so that these are never passed over,
 * whatever their length; one comparison for most names (they start with
 * neither x nor f).
 */
export function isEdgeSetFieldAt(text: string, at: number, colon: number): boolean {
  const first = text.charCodeAt(at) | 0x20;
  if (first === 0x78 /* x */) return colon - at > PREFIX.length ? prefixAt(text, at) : colon - at === 9 && nameAt(text, at, "x-real-ip");
  return first === 0x66 /* f */ && colon - at === 9 && nameAt(text, at, "forwarded");
}

/** Every line of a head (its text, lines after CRLF) that carries one of burrow's fields, in any spelling. */
export const BURROW_FIELD_LINES = /\r\nx[-_]burrow[-_][^:\r]*:[^\r]*/gi;

/** Whether b[at, at + lower.length) is `lower` (ASCII) in any case. */
function nameIn(b: Uint8Array, at: number, lower: string): boolean {
  for (let i = 0; i < lower.length; i++) if ((b[at + i]! | 0x20) !== lower.charCodeAt(i)) return false;
  return true;
}

/** isEdgeSetFieldAt for a name read from bytes, b[at, colon). */
export function isEdgeSetFieldIn(b: Uint8Array, at: number, colon: number): boolean {
  const first = b[at]! | 0x20;
  if (first === 0x78 /* x */) {
    if (colon - at === 9) return nameIn(b, at, "x-real-ip");
    if (colon - at <= PREFIX.length) return false;
    for (let i = 0; i < PREFIX.length; i++) {
      const c = b[at + i]! | 0x20;
      const want = PREFIX.charCodeAt(i);
      if (c !== want && !(want === 0x2d && c === 0x7f)) return false;
    }
    return true;
  }
  return first === 0x66 /* f */ && colon - at === 9 && nameIn(b, at, "forwarded");
}
