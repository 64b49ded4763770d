/**
 * A local service's response head, from its text to what the agent needs:
 * status, header fields, how the body is framed and whether the connection
 * may carry another request. Strict where a lax reading could frame the body
 * two ways (content-length, transfer-encoding); a head that does not parse is
 * an error string, never a guess.
 */
import type { HeaderList } from "../protocol/messages.ts";
import { HOP_BY_HOP } from "./header-list.ts";

import { listHas, pushList, readFields } from "./field-lines.ts";

/** How the body after the head is delimited (RFC 9112 §6.3). */
export type BodyFraming = "none" | "length" | "chunked" | "close";

export interface ParsedHead {
  status: number;
  /** The reason phrase as sent (may be empty). */
  reason: string;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: 0 | 1;
  /** Every header field in order, names as sent, repeated fields kept apart. */
  headers: HeaderList;
  framing: BodyFraming;
  /** The body's length for "length" framing (0 for "none"). */
  length: number;
  /** The connection may carry another request once this response is read. */
  keepAlive: boolean;
  /** The head as read (without its blank line): `headers` again, whole, for a reader that read it for its framing only. */
  text?: string;
  /** Or its bytes (the blank line included), when it was read from them (ResponseParser): a view of the input, valid while it is. */
  bytes?: Uint8Array;
}

/** What the edge accepts in a REPLY: a head beyond these is refused here, with a clear reason, rather than there. */
export const MAX_HEADER_FIELDS = 1000;
const MAX_NAME_LENGTH = 256;

const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9][0-9]{2})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?$/;
const DIGITS = /^[0-9]{1,15}$/;

/** Where the (n+1)-th header line starts, after the first line ending at `firstEnd`. */
function fieldLineStart(text: string, firstEnd: number, n: number): number {
  let at = firstEnd + 2;
  for (let i = 0; i < n; i++) at = text.indexOf("\r\n", at) + 2;
  return at;
}

/**
 * Parses a response head: the status line and header lines, separated by
 * CRLF, without the blank line that ends it. `requestMethod` decides whether
 * a body follows (never after HEAD).
 */
/** The lengths of the names a response's framing depends on: connection, content-length, transfer-encoding. */
const FRAMING_NAMES: ReadonlySet<number> = new Set([10, 14, 17]);

/** What the fields of the response head being parsed said (as request-head.ts's RequestFields). */
class ResponseFields {
  headers: HeaderList = [];
  lengths: string[] | undefined;
  codings: string[] | undefined;
  connection = "";

  start(): this {
    this.headers = [];
    this.lengths = undefined;
    this.codings = undefined;
    this.connection = "";
    return this;
  }

  field(name: string, lower: string, value: string): void {
    this.headers.push([name, value]);
    if (lower === "content-length") pushList((this.lengths ??= []), value);
    else if (lower === "transfer-encoding") pushList((this.codings ??= []), value.toLowerCase(), true);
    else if (lower === "connection") this.connection += `,${value.toLowerCase()}`;
  }
}
const responseFields = new ResponseFields();

/**
 * `fields` false: only what frames the body is read (`headers` holds just
 * those fields), for a reader that passes the head on without showing it.
 */
export function parseHead(text: string, requestMethod: string, fields = true): ParsedHead | string {
  const firstEnd = text.indexOf("\r\n");
  const first = firstEnd < 0 ? text : text.slice(0, firstEnd);
  const status = STATUS_LINE.exec(first);
  if (!status) return `malformed status line ${JSON.stringify(first.slice(0, 60))}`;
  const http10 = status[1] === "0";
  const code = Number(status[2]);
  const seen = responseFields.start();
  const fault = readFields(text, firstEnd < 0 ? text.length : firstEnd + 2, MAX_HEADER_FIELDS, MAX_NAME_LENGTH, seen, fields ? undefined : FRAMING_NAMES);
  const { headers, lengths, codings, connection } = seen;
  let controlIn = "";
  // a fault is said once, about the line it is on: read again whole to find it
  if (fault && !fields) return parseHead(text, requestMethod, true);
  if (fault) {
    // which line: the one after the last field read (the faults are about one line, never quoted whole)
    const at = fieldLineStart(text, firstEnd, headers.length);
    const line = text.slice(at, Math.min(text.length, at + 60)).split("\r\n")[0]!;
    if (fault === "too-many") return `more than ${MAX_HEADER_FIELDS} header fields`;
    if (fault === "line") return `malformed header line ${JSON.stringify(line)}`;
    if (fault === "name") return `malformed header name ${JSON.stringify(line.split(":")[0]!.slice(0, 60))}`;
    if (fault === "long-name") return `header name longer than ${MAX_NAME_LENGTH} characters`;
    controlIn = line.split(":")[0]!;
    return `control characters in header ${controlIn}`;
  }

  let keepAlive = http10 ? listHas(connection, "keep-alive") : !listHas(connection, "close");
  let framing: BodyFraming;
  let length = 0;
  if (requestMethod === "HEAD" || code < 200 || code === 204 || code === 304) {
    framing = "none";
    if (code === 101) keepAlive = false; // the connection now speaks another protocol
  } else if (codings) {
    // we send no TE header, so chunked is the only coding a service may use (RFC 9112 §6.1)
    if (codings.length !== 1 || codings[0] !== "chunked") return `unsupported transfer-encoding ${JSON.stringify(codings.join(", "))}`;
    framing = "chunked";
    // a response with both is a smuggling attempt or a broken proxy: read it by chunks, then close (RFC 9112 §6.3)
    if (lengths) keepAlive = false;
  } else if (lengths) {
    const first = lengths[0]!;
    if (!DIGITS.test(first) || lengths.some((v) => v !== first)) return `invalid content-length ${JSON.stringify(lengths.join(", "))}`;
    framing = "length";
    length = Number(first);
  } else {
    framing = "close";
    keepAlive = false;
  }
  return { status: code, reason: status[3] ?? "", minor: http10 ? 0 : 1, headers, framing, length, keepAlive, text };
}

/**
 * The header fields for the REPLY: hop-by-hop fields (and those the
 * Connection header names) dropped; Content-Length kept only when it frames
 * the body or describes a bodiless answer, and then once, so the edge reads
 * one clear length.
 */
export function replyHeaders(head: ParsedHead): HeaderList {
  let connectionListed: Set<string> | undefined;
  for (const [name, value] of head.headers) {
    if (name.toLowerCase() !== "connection") continue;
    connectionListed ??= new Set();
    for (const t of value.split(",")) if (t.trim()) connectionListed.add(t.trim().toLowerCase());
  }
  const out: HeaderList = [];
  let lengthSeen = false;
  for (const pair of head.headers) {
    const name = pair[0].toLowerCase();
    if (HOP_BY_HOP.has(name) || connectionListed?.has(name)) continue;
    if (name === "content-length") {
      if (head.framing === "chunked" || head.framing === "close" || lengthSeen) continue;
      lengthSeen = true;
      if (head.framing === "length") {
        out.push([name, String(head.length)]);
        continue;
      }
    }
    out.push([name, pair[1]]);
  }
  return out;
}

/**
 * A response head as bytes again, with `fields` in place of those it came
 * with (a tunnel's header rules): the status line as sent (version, code,
 * reason phrase), the fields, the blank line.
 */
export function responseHeadBytes(head: ParsedHead, fields: HeaderList): Uint8Array {
  let text = `HTTP/1.${head.minor} ${head.status}${head.reason ? ` ${head.reason}` : ""}\r\n`;
  for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
  return Buffer.from(`${text}\r\n`, "latin1");
}
