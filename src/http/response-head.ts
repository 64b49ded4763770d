/**
 * A local service's response head, from its text to what the agent needs:
 * status, header fields, how the body is framed and whether the connection
 * may carry another request. Strict where a lax reading could frame the body
 * two ways (content-length, transfer-encoding); a head that does not parse is
 * an error string, never a guess.
 */
import type { HeaderList } from "../protocol/messages.ts";
import { HOP_BY_HOP } from "./header-list.ts";

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
}

/** What the edge accepts in a REPLY: a head beyond these is refused here, with a clear reason, rather than there. */
export const MAX_HEADER_FIELDS = 1000;
const MAX_NAME_LENGTH = 256;

const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9][0-9]{2})(?: ([^\x00-\x08\x0a-\x1f\x7f]*))?$/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** Field values: visible bytes, spaces, tabs and obs-text; no CR, LF, NUL or other controls. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const DIGITS = /^[0-9]{1,15}$/;

/**
 * Parses a response head: the status line and header lines, separated by
 * CRLF, without the blank line that ends it. `requestMethod` decides whether
 * a body follows (never after HEAD).
 */
export function parseHead(text: string, requestMethod: string): ParsedHead | string {
  const lines = text.split("\r\n");
  const status = STATUS_LINE.exec(lines[0]!);
  if (!status) return `malformed status line ${JSON.stringify(lines[0]!.slice(0, 60))}`;
  if (lines.length - 1 > MAX_HEADER_FIELDS) return `more than ${MAX_HEADER_FIELDS} header fields`;
  const http10 = status[1] === "0";
  const code = Number(status[2]);
  const headers: HeaderList = [];
  let lengths: string[] | undefined;
  let codings: string[] | undefined;
  let connection = "";
  for (let i = 1; i < lines.length; i++) {
    const line = lines[i]!;
    const colon = line.indexOf(":");
    // a line starting with whitespace is obsolete folding; whitespace before the colon is forbidden (RFC 9112 §5.1)
    if (colon <= 0) return `malformed header line ${JSON.stringify(line.slice(0, 60))}`;
    const name = line.slice(0, colon);
    if (!TOKEN.test(name)) return `malformed header name ${JSON.stringify(name.slice(0, 60))}`;
    if (name.length > MAX_NAME_LENGTH) return `header name longer than ${MAX_NAME_LENGTH} characters`;
    const value = line.slice(colon + 1).trim();
    if (!FIELD_VALUE.test(value)) return `control characters in header ${name}`;
    const lower = name.toLowerCase();
    headers.push([name, value]);
    if (lower === "content-length") (lengths ??= []).push(...value.split(",").map((v) => v.trim()));
    else if (lower === "transfer-encoding") (codings ??= []).push(...value.toLowerCase().split(",").map((v) => v.trim()).filter(Boolean));
    else if (lower === "connection") connection += `,${value.toLowerCase()}`;
  }

  const tokens = connection.split(",").map((t) => t.trim());
  let keepAlive = http10 ? tokens.includes("keep-alive") : !tokens.includes("close");
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
  return { status: code, reason: status[3] ?? "", minor: http10 ? 0 : 1, headers, framing, length, keepAlive };
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
