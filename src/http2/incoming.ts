/**
 * The client's side of its streams: header blocks made into requests (or
 * trailers), DATA into their bodies, with the receive windows.
 *
 * A request is checked before anyone sees it: its header list within the
 * bound while HPACK decodes it (past it: 431), malformed fields (a stream
 * error), the concurrent streams (REFUSED_STREAM past the advertised
 * number). Its body goes to its stream as it comes, each DATA frame counted
 * against the stream's window (reopened only as the consumer takes the
 * bytes, stream.ts) and the connection's (reopened as bytes arrive, so a
 * slow stream never holds the others back), and against its
 * content-length.
 */
import { log } from "../log.ts";
import { HpackDecoder, type FieldSink } from "./hpack-decoder.ts";
import type { Http2Limits } from "./limits.ts";
import { H2_STREAM_WINDOW } from "./limits.ts";
import { RequestFields } from "./request-fields.ts";
import type { Sender } from "./sender.ts";
import { H2Stream, type Peer } from "./stream.ts";
import { ConnectionError, ErrorCode, Flag, MAX_WINDOW } from "./wire.ts";

/** What the incoming side needs of its connection. */
export interface IncomingOwner {
  readonly streams: Map<number, H2Stream>;
  readonly sender: Sender;
  /** New streams are served (no GOAWAY either way yet). */
  readonly acceptsStreams: boolean;
  /** Hands a new stream to the handler. */
  request(s: H2Stream): void;
  /** A stream error the client caused (RST_STREAM, counted with its resets). */
  streamError(id: number, code: number): void;
  /** Streams this side reset lately (their late frames are dropped). */
  readonly recentlyReset: ReadonlySet<number>;
  remember(id: number): void;
  chargeControl(): void;
  chargeReset(): void;
  /** Sends a WINDOW_UPDATE for the connection, RST_STREAM. */
  connectionWindowUpdate(increment: number): void;
  rstStream(id: number, code: number): void;
}

/** A field sink that keeps nothing: a block read only for what it does to the HPACK table. */
const DISCARD: FieldSink = { field() {} };
/** The connection's window: at least this, or every stream's window together, so that it never holds a stream back. */
const CONNECTION_WINDOW_MIN = 1024 * 1024;

export class Incoming {
  /** The highest stream id the client opened. */
  highest = 0;
  /** The connection's window for the client's DATA: its size, what is left, what came since the last WINDOW_UPDATE. */
  readonly windowSize: number;
  private window: number;
  private unacked = 0;
  private readonly decoder = new HpackDecoder();
  /** The DATA frame being read: its stream (undefined: dropped), its length, content bytes so far, END_STREAM. */
  private dataStream: H2Stream | undefined;
  private dataLength = 0;
  private dataContent = 0;
  private dataEnds = false;

  constructor(
    private readonly owner: IncomingOwner,
    private readonly limits: Http2Limits,
    private readonly peer: Peer,
  ) {
    this.windowSize = Math.min(MAX_WINDOW, Math.max(CONNECTION_WINDOW_MIN, limits.maxConcurrentStreams * H2_STREAM_WINDOW));
    this.window = this.windowSize;
  }

  // -- DATA ---------------------------------------------------------------------------------------------

  dataStart(id: number, flags: number, length: number): void {
    this.dataStream = undefined;
    if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on stream 0");
    // the connection's window counts every DATA byte, padding and dropped frames included, and reopens at once
    this.window -= length;
    if (this.window < 0) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA past the connection's window");
    this.unacked += length;
    if (this.unacked >= this.windowSize / 2) {
      this.owner.connectionWindowUpdate(this.unacked);
      this.window += this.unacked;
      this.unacked = 0;
    }
    if (length === 0 && !(flags & Flag.END_STREAM)) this.owner.chargeControl();
    const s = this.owner.streams.get(id);
    if (!s) {
      if (id > this.highest) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA on a stream not opened");
      if (!this.owner.recentlyReset.has(id)) this.owner.streamError(id, ErrorCode.STREAM_CLOSED);
      return;
    }
    if (s.remoteEnded) return this.owner.streamError(id, ErrorCode.STREAM_CLOSED);
    s.recvWindow -= length;
    if (s.recvWindow < 0) return this.owner.streamError(id, ErrorCode.FLOW_CONTROL_ERROR);
    this.dataStream = s;
    this.dataLength = length;
    this.dataContent = 0;
    this.dataEnds = (flags & Flag.END_STREAM) !== 0;
  }

  dataPiece(bytes: Uint8Array): void {
    const s = this.dataStream;
    if (!s) return;
    this.dataContent += bytes.byteLength;
    // more body than its content-length said: malformed (RFC 9113 §8.1.1)
    if (s.request.contentLength >= 0 && s.bytesReceived + bytes.byteLength > s.request.contentLength) {
      this.dataStream = undefined;
      return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR);
    }
    s.receivedData(bytes);
    if (s.isClosed) this.dataStream = undefined;
  }

  dataEnd(): void {
    const s = this.dataStream;
    this.dataStream = undefined;
    if (!s || s.isClosed) return;
    s.creditNow(this.dataLength - this.dataContent);
    if (!this.dataEnds) return;
    if (s.request.contentLength >= 0 && s.bytesReceived !== s.request.contentLength) return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR);
    s.receivedEnd();
  }

  // -- header blocks -------------------------------------------------------------------------------------

  /** A whole header block on stream `id`: a new request, or a request's trailers. `selfDependent`: its HEADERS named itself its dependency. */
  headerBlock(id: number, endStream: boolean, block: Uint8Array, selfDependent: boolean): void {
    const { owner } = this;
    if (id === 0 || id % 2 === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `HEADERS on stream ${id}, which a client may not open`);
    const existing = owner.streams.get(id);
    if (existing) return this.trailers(existing, endStream, block);
    if (id <= this.highest) {
      this.decoder.decode(block, 0, DISCARD);
      if (owner.recentlyReset.has(id)) return;
      throw new ConnectionError(ErrorCode.STREAM_CLOSED, `HEADERS on stream ${id}, which is closed`);
    }
    this.highest = id;
    // after GOAWAY no stream is served: the block is read for the table alone
    if (!owner.acceptsStreams) return void this.decoder.decode(block, 0, DISCARD);
    const fields = new RequestFields();
    const within = this.decoder.decode(block, this.limits.maxHeaderListBytes, fields);
    fields.finish();
    if (!within) return this.refuseTooLarge(id, endStream);
    if (fields.fault !== undefined || selfDependent) return owner.streamError(id, ErrorCode.PROTOCOL_ERROR);
    // a request that ends at its HEADERS yet says it has a body (RFC 9113 §8.1.1)
    if (endStream && fields.contentLength > 0) return owner.streamError(id, ErrorCode.PROTOCOL_ERROR);
    if (owner.streams.size >= this.limits.maxConcurrentStreams) return owner.streamError(id, ErrorCode.REFUSED_STREAM);
    const s = new H2Stream(owner.sender, id, fields.request(), this.peer, !endStream, H2_STREAM_WINDOW, owner.sender.initialWindow);
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

  private trailers(s: H2Stream, endStream: boolean, block: Uint8Array): void {
    const fields = new RequestFields(true);
    const within = this.decoder.decode(block, this.limits.maxHeaderListBytes, fields);
    if (s.remoteEnded) return this.owner.streamError(s.id, ErrorCode.STREAM_CLOSED);
    // a second HEADERS is a trailer section, which ends the stream (RFC 9113 §8.1)
    if (!endStream || fields.fault !== undefined) return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR);
    if (!within) return this.owner.streamError(s.id, ErrorCode.ENHANCE_YOUR_CALM);
    if (s.request.contentLength >= 0 && s.bytesReceived !== s.request.contentLength) return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR);
    s.receivedTrailers(fields.fields);
    if (!s.isClosed) s.receivedEnd();
  }

  /** A header list past the bound: 431, as HTTP/1.1 answers a head too large, and the rest of the request refused. */
  private refuseTooLarge(id: number, endStream: boolean): void {
    this.owner.chargeReset();
    this.owner.sender.answer431(id);
    if (!endStream) this.owner.rstStream(id, ErrorCode.NO_ERROR);
    this.owner.remember(id);
  }
}
