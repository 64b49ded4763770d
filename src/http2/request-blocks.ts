/**
 * A server's header blocks: a block on a new stream id is a request, one on
 * an open stream its trailers.
 *
 * A request is checked before anyone sees it: its header list within the
 * bound while HPACK decodes it (past it: 431), malformed fields (a stream
 * error), the concurrent streams (REFUSED_STREAM past the advertised
 * number). Then its stream is opened and handed on; its body comes as DATA
 * (incoming.ts).
 */
import { log } from "../log.ts";
import type { Incoming } from "./incoming.ts";
import { H2_STREAM_WINDOW, type Http2Limits } from "./limits.ts";
import { RequestFields } from "./request-fields.ts";
import type { Sender } from "./sender.ts";
import { H2Stream, type Peer } from "./stream.ts";
import { ConnectionError, ErrorCode } from "./wire.ts";

/** What reading a request's block needs of the server's connection. */
export interface RequestBlockOwner {
  readonly streams: Map<number, H2Stream>;
  readonly sender: Sender;
  readonly incoming: Incoming;
  readonly limits: Http2Limits;
  readonly peer: Peer;
  /** The highest stream id the client opened. */
  highest: number;
  /** New streams are served (no GOAWAY either way yet). */
  readonly acceptsStreams: boolean;
  /** Streams this side reset lately (their late frames are dropped). */
  readonly recentlyReset: ReadonlySet<number>;
  /** Hands a new stream to the handler. */
  request(s: H2Stream): void;
  streamError(id: number, code: number, act: string): void;
  chargeReset(): void;
  rstStream(id: number, code: number): void;
  remember(id: number): void;
}

/** A whole header block on stream `id`: a new request, or a request's trailers. `selfDependent`: its HEADERS named itself its dependency. */
export function readRequestBlock(owner: RequestBlockOwner, id: number, endStream: boolean, block: Uint8Array, selfDependent: boolean): void {
  if (id === 0 || id % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${id}, which a client may not open`);
  const existing = owner.streams.get(id);
  if (existing) return trailers(owner, existing, endStream, block);
  if (id <= owner.highest) {
    owner.incoming.discard(block);
    if (owner.recentlyReset.has(id)) return;
    throw new ConnectionError(ErrorCode.STREAM_CLOSED, `HEADERS on stream ${id}, which is closed`);
  }
  owner.highest = id;
  // after GOAWAY no stream is served: the block is read for the table alone
  if (!owner.acceptsStreams) return owner.incoming.discard(block);
  const fields = new RequestFields();
  const within = owner.incoming.decoder.decode(block, owner.limits.maxHeaderListBytes, fields);
  fields.finish();
  if (!within) return refuseTooLarge(owner, id, endStream);
  if (fields.fault !== undefined || selfDependent) return owner.streamError(id, ErrorCode.PROTOCOL_ERROR, "sent a malformed request");
  // a request that ends at its HEADERS yet says it has a body (RFC 9113 §8.1.1)
  if (endStream && fields.contentLength > 0) return owner.streamError(id, ErrorCode.PROTOCOL_ERROR, "sent a malformed request");
  if (owner.streams.size >= owner.limits.maxConcurrentStreams) return owner.streamError(id, ErrorCode.REFUSED_STREAM, "opened too many streams");
  const s = new H2Stream(owner.sender, id, fields.request(), owner.peer, !endStream, H2_STREAM_WINDOW, owner.sender.initialWindow);
  owner.streams.set(id, s);
  try {
    owner.request(s);
  } catch (err) {
    log.error("an HTTP/2 request's handler failed", { err: String((err as Error)?.message ?? err).slice(0, 200) });
    s.abort(ErrorCode.INTERNAL_ERROR);
    return;
  }
  if (endStream) s.receivedEnd();
}

function trailers(owner: RequestBlockOwner, s: H2Stream, endStream: boolean, block: Uint8Array): void {
  const fields = new RequestFields(true);
  const within = owner.incoming.decoder.decode(block, owner.limits.maxHeaderListBytes, fields);
  if (s.remoteEnded) return owner.streamError(s.id, ErrorCode.STREAM_CLOSED, "sent HEADERS after the stream's end");
  // a second HEADERS is a trailer section, which ends the stream (RFC 9113 §8.1)
  if (!endStream || fields.fault !== undefined) return owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR, "sent malformed trailers");
  if (!within) return owner.streamError(s.id, ErrorCode.ENHANCE_YOUR_CALM, "sent trailers past the header list's bound");
  if (s.expectedLength >= 0 && s.bytesReceived !== s.expectedLength) return owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR, "sent less body than its content-length");
  s.receivedTrailers(fields.fields);
  if (!s.isClosed) s.receivedEnd();
}

/** A header list past the bound: 431, as HTTP/1.1 answers a head too large, and the rest of the request refused. */
function refuseTooLarge(owner: RequestBlockOwner, id: number, endStream: boolean): void {
  owner.chargeReset();
  owner.sender.answer431(id);
  if (!endStream) owner.rstStream(id, ErrorCode.NO_ERROR);
  owner.remember(id);
}
