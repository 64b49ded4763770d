/**
 * A request body request-body-find-replace rewrote, sent in place of the
 * one read (request-body.ts): the bytes read, which each door sends on
 * first, are swapped for the new body, and the head the forward frames it
 * by says its length (the action set the fields: Content-Length, no
 * Transfer-Encoding). Only a request whose run rewrote its body is
 * touched; the doors ask with one property read.
 */
import type { RequestHead } from "../../http/request-head.ts";
import type { HttpConnection } from "../http-connection.ts";
import type { LayeredRun } from "./layered-run.ts";
import type { ReadBody } from "./request-body.ts";

/** The body the run's actions made, when they rewrote the one read; else undefined. */
export function replacedBody(run: LayeredRun | undefined): Uint8Array | undefined {
  const request = run?.request;
  return request?.bodyReplaced === true ? request.body : undefined;
}

/** The head frames `body`: by its length (an empty one: no body). */
function framedBy(head: RequestHead, body: Uint8Array): void {
  head.framing = body.byteLength === 0 ? "none" : "length";
  head.length = body.byteLength;
}

/**
 * HTTP/1.1: the body read was put back in front of what the connection
 * holds (readConnectionBody), then whatever came after it: the new body
 * goes in its place, for forward() to take as it takes any body.
 */
export function replaceConnectionBody(conn: HttpConnection, head: RequestHead, read: ReadBody, body: Uint8Array): void {
  let rawBytes = 0;
  for (const chunk of read.raw) rawBytes += chunk.byteLength;
  const held = conn.takeEarly();
  if (body.byteLength > 0) conn.unread(body);
  if (held && held.byteLength > rawBytes) conn.unread(held.subarray(rawBytes));
  read.raw = [body];
  framedBy(head, body);
}

/** An HTTP/2 stream's or a relayed stream's body: its door sends `raw` on first, which becomes the new body. */
export function replaceStreamBody(head: RequestHead, read: ReadBody, body: Uint8Array): void {
  read.raw = [body];
  framedBy(head, body);
}
