/**
 * A Response the server makes itself (its pages, redirects, access
 * refusals) as the bytes of an HTTP/1.1 answer: status line, header fields,
 * Date, the body with its Content-Length. The server's own answers are small
 * and whole, so the body is read in full first; a bodiless status (1xx,
 * 204, 304) or an answer to HEAD carries none.
 */
import { STATUS_CODES } from "node:http";

export interface AnswerOptions {
  /** The request was HEAD: the head says the length, no body follows. */
  head?: boolean;
  /** The connection closes after this answer: say so. */
  close?: boolean;
}

const NO_BODY = new Set([204, 304]);

/** Field names the framing given to responseHead() decides, never taken from the Response. */
const FRAMING = new Set(["content-length", "connection", "transfer-encoding", "keep-alive", "set-cookie"]);

/** A status with no body whatever the request was (1xx, 204, 304). */
export const bodilessStatus = (status: number) => status < 200 || NO_BODY.has(status);

/**
 * The head of an HTTP/1.1 answer made from `res`: its status line and
 * fields, a Date when it has none, and the framing given (a length, or
 * chunked, and whether the connection closes after it), blank line included.
 */
export function responseHead(res: Response, framing: { length?: number | string; chunked?: boolean; close?: boolean }): Uint8Array {
  let text = `HTTP/1.1 ${res.status} ${res.statusText || STATUS_CODES[res.status] || ""}\r\n`;
  for (const [name, value] of res.headers) if (!FRAMING.has(name)) text += `${name}: ${value}\r\n`;
  for (const cookie of res.headers.getSetCookie()) text += `set-cookie: ${cookie}\r\n`;
  if (!res.headers.has("date")) text += `date: ${new Date().toUTCString()}\r\n`;
  if (framing.length !== undefined) text += `content-length: ${framing.length}\r\n`;
  if (framing.chunked) text += "transfer-encoding: chunked\r\n";
  if (framing.close) text += "connection: close\r\n";
  return Buffer.from(`${text}\r\n`, "latin1");
}

export async function responseBytes(res: Response, opts: AnswerOptions = {}): Promise<Uint8Array> {
  const body = res.body === null ? new Uint8Array(0) : new Uint8Array(await res.arrayBuffer());
  const bodiless = bodilessStatus(res.status);
  const headBytes = responseHead(res, { ...(bodiless ? {} : { length: body.byteLength }), close: opts.close });
  if (bodiless || opts.head || body.byteLength === 0) return headBytes;
  return Buffer.concat([headBytes, body]);
}
