/**
 * A client's header blocks: on a stream it opened, the response's heads
 * (informational ones, then the final one) and, after the final one, its
 * trailer section. Each is checked by response-fields.ts, the list bounded
 * while HPACK decodes it; a block that breaks a rule fails its stream with
 * why, and the connection goes on.
 */
import type { H2ClientStream } from "./client-stream.ts";
import type { Incoming } from "./incoming.ts";
import { ResponseFields } from "./response-fields.ts";
import { ErrorCode } from "./wire.ts";

/** What reading a response's block needs of the client's connection. */
export interface ResponseBlockOwner {
  readonly streams: ReadonlyMap<number, H2ClientStream>;
  readonly incoming: Incoming;
  /** Throws the ConnectionError a frame on stream `id` is when this side never opened it. */
  mustBeOpened(id: number, what: string): void;
}

/** A whole header block on stream `id`: a response head, or its trailers. */
export function readResponseBlock(owner: ResponseBlockOwner, id: number, endStream: boolean, block: Uint8Array, maxHeaderListBytes: number): void {
  owner.mustBeOpened(id, "HEADERS");
  const s = owner.streams.get(id);
  if (!s) return owner.incoming.discard(block); // a stream this side gave up: read for the table alone
  const trailers = s.finalHeadReceived;
  const fields = new ResponseFields(trailers);
  const within = owner.incoming.decoder.decode(block, maxHeaderListBytes, fields);
  fields.finish();
  if (s.remoteEnded) return s.fail(ErrorCode.STREAM_CLOSED, "the service sent HEADERS after the stream's end");
  if (!within) return s.fail(ErrorCode.CANCEL, `the service's response ${trailers ? "trailers" : "head"} is larger than ${maxHeaderListBytes} bytes`);
  if (fields.fault !== undefined) return s.fail(ErrorCode.PROTOCOL_ERROR, `the service's response is malformed: ${fields.fault}`);
  // after the final head, a header block is the trailer section, which ends the stream (RFC 9113 §8.1)
  if (trailers) {
    if (!endStream) return s.fail(ErrorCode.PROTOCOL_ERROR, "the service's response is malformed: trailers that do not end the stream");
    return s.receivedEnd(fields.fields);
  }
  s.receivedHead(fields.status, fields.fields, endStream);
}
