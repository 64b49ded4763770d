/**
 * An HTTP/2 service's response as the HTTP/1.1 response an h1 stream
 * carries to the edge: a status line (with the status's usual reason, as
 * HTTP/2 has none), the fields as the service sent them (checked by
 * http2/response-fields.ts: no line of the service's making can get in),
 * and the body framed the way HTTP/1.1 can say where it ends:
 *
 * - no body (HEAD, 1xx, 204, 304): the fields alone;
 * - a Content-Length: the bytes as they come;
 * - a head that ends the stream: `content-length: 0`;
 * - else chunked (RFC 9112 §7.1), each DATA frame a chunk as it comes, and
 *   the service's trailers (grpc-status, grpc-message) as the trailer
 *   fields of the last chunk (§7.1.2); to an HTTP/1.0 request, which cannot
 *   read chunks, the body ends with the stream instead (`connection:
 *   close`) and trailers are dropped.
 */
import { STATUS_CODES } from "node:http";
import type { BodyFraming } from "../../http/response-head.ts";

const CRLF = Buffer.from("\r\n", "latin1");
/** Trailer fields that would frame or route the message, which a trailer section must not carry (RFC 9110 §6.5.1). */
const NOT_IN_TRAILERS: ReadonlySet<string> = new Set(["content-length", "content-type", "host", "trailer"]);

/** How the HTTP/1.1 response carries the body of an HTTP/2 response to `method` with `status`. */
export function framingFor(method: string, status: number, contentLength: number, endStream: boolean, http10: boolean): BodyFraming {
  if (method === "HEAD" || status < 200 || status === 204 || status === 304) return "none";
  if (contentLength >= 0 || endStream) return "length";
  return http10 ? "close" : "chunked";
}

/** The HTTP/1.1 head, without its blank line: status line, fields, and what `framing` needs said. */
export function h1HeadText(status: number, fields: readonly (readonly [string, string])[], framing: BodyFraming, contentLength: number): string {
  const reason = STATUS_CODES[status];
  let text = reason ? `HTTP/1.1 ${status} ${reason}` : `HTTP/1.1 ${status}`;
  for (const [name, value] of fields) text += `\r\n${name}: ${value}`;
  if (framing === "chunked") text += "\r\ntransfer-encoding: chunked";
  else if (framing === "close") text += "\r\nconnection: close";
  else if (framing === "length" && contentLength < 0) text += "\r\ncontent-length: 0";
  return text;
}

/** The head's bytes, blank line included. */
export function h1HeadBytes(text: string): Uint8Array {
  return Buffer.from(`${text}\r\n\r\n`, "latin1");
}

/** One chunk of a chunked body: its size line, the bytes, CRLF (one buffer: one write). */
export function chunkOf(piece: Uint8Array): Uint8Array {
  return Buffer.concat([Buffer.from(`${piece.byteLength.toString(16)}\r\n`, "latin1"), piece, CRLF]);
}

/** The last chunk, with `trailers` as its trailer fields, and the blank line that ends the body. */
export function lastChunk(trailers: readonly (readonly [string, string])[] | undefined): Uint8Array {
  let text = "0\r\n";
  for (const [name, value] of trailers ?? []) if (!NOT_IN_TRAILERS.has(name)) text += `${name}: ${value}\r\n`;
  return Buffer.from(`${text}\r\n`, "latin1");
}
