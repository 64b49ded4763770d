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

export async function responseBytes(res: Response, opts: AnswerOptions = {}): Promise<Uint8Array> {
  const body = res.body === null ? new Uint8Array(0) : new Uint8Array(await res.arrayBuffer());
  const status = res.status;
  const bodiless = status < 200 || NO_BODY.has(status);
  let text = `HTTP/1.1 ${status} ${res.statusText || STATUS_CODES[status] || ""}\r\n`;
  for (const [name, value] of res.headers) {
    if (name === "content-length" || name === "connection" || name === "transfer-encoding" || name === "set-cookie") continue;
    text += `${name}: ${value}\r\n`;
  }
  for (const cookie of res.headers.getSetCookie()) text += `set-cookie: ${cookie}\r\n`;
  text += `date: ${new Date().toUTCString()}\r\n`;
  if (!bodiless) text += `content-length: ${body.byteLength}\r\n`;
  if (opts.close) text += "connection: close\r\n";
  text += "\r\n";
  const headBytes = Buffer.from(text, "latin1");
  if (bodiless || opts.head || body.byteLength === 0) return headBytes;
  return Buffer.concat([headBytes, body]);
}
