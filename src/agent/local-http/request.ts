/**
 * A visitor's request as bytes for the local service: the head as the edge
 * sent it (hop-by-hop fields already gone), with the Host the tunnel wants,
 * and the body framed as HTTP/1.1 needs it. Nothing is added that the
 * visitor did not send (no Accept-Encoding, no User-Agent), except the
 * framing itself.
 */
import type { RequestHead } from "../../protocol/messages.ts";

/** How the request body travels: as is under the visitor's Content-Length, or chunked when its length is unknown. */
export type RequestBody = { kind: "none" } | { kind: "length"; length: number } | { kind: "chunked" };

export interface LocalRequest {
  method: string;
  head: Uint8Array;
  body: RequestBody;
}

export interface HostChoice {
  /** Sent instead of the visitor's Host; undefined keeps theirs. */
  override?: string;
  /** Sent when the visitor sent no Host at all. */
  fallback: string;
}

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** A request target: visible ASCII only (the edge sends it percent-encoded), origin form or "*". */
const TARGET = /^(?:\/[\x21-\x7e]*|\*)$/;
/** Visible bytes, spaces, tabs and obs-text: a value with CR or LF could start a header of its own. */
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const NO_BODY: RequestBody = { kind: "none" };

/** The request, or why it cannot be sent. */
export function serialiseRequest(head: RequestHead, hasBody: boolean, host: HostChoice): LocalRequest | string {
  if (!TOKEN.test(head.method)) return `malformed request method ${JSON.stringify(head.method.slice(0, 32))}`;
  if (!TARGET.test(head.path)) return "malformed request path";
  let text = `${head.method} ${head.path} HTTP/1.1\r\n`;
  let hostSent = host.override !== undefined;
  if (host.override !== undefined) text += `host: ${host.override}\r\n`;
  let length: string | undefined;
  for (const [name, value] of head.headers) {
    if (name === "host") {
      if (host.override !== undefined) continue;
      hostSent = true;
    }
    // the platform would refuse these; they are dropped, not fatal (as the edge's own Headers would)
    if (!TOKEN.test(name) || !FIELD_VALUE.test(value)) continue;
    if (name === "transfer-encoding") continue; // the framing below is ours alone
    if (name === "content-length") {
      if (length !== undefined) continue; // one length, or the service could read the body two ways
      // no body follows (a GET's length, which Bun gives the edge no body for): any length but 0
      // would make the service wait for bytes, and take them from the next request on this connection
      if (!hasBody && value.trim() !== "0") continue;
      length = value.trim();
    }
    text += `${name}: ${value}\r\n`;
  }
  if (!hostSent) text += `host: ${host.fallback}\r\n`;

  let body = NO_BODY;
  if (hasBody) {
    if (length !== undefined && /^[0-9]{1,15}$/.test(length)) body = { kind: "length", length: Number(length) };
    else if (length !== undefined) return "malformed request content-length";
    else {
      // the visitor streams a body of unknown length: frame it ourselves
      body = { kind: "chunked" };
      text += "transfer-encoding: chunked\r\n";
    }
  }
  text += "\r\n";
  return { method: head.method, head: Buffer.from(text, "latin1"), body };
}

const CRLF = Buffer.from("\r\n");
/** The zero-size chunk and an empty trailer section. */
export const LAST_CHUNK: Uint8Array = Buffer.from("0\r\n\r\n");

/** One piece of a chunked body, size line and CRLF included, as one buffer for one socket write. */
export function frameChunk(piece: Uint8Array): Uint8Array {
  const size = Buffer.from(`${piece.byteLength.toString(16)}\r\n`, "latin1");
  const out = Buffer.allocUnsafe(size.byteLength + piece.byteLength + 2);
  out.set(size, 0);
  out.set(piece, size.byteLength);
  out.set(CRLF, size.byteLength + piece.byteLength);
  return out;
}
