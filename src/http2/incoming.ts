/**
 * What comes in on a connection's streams, either side's: DATA to its
 * stream with the receive windows, and the HPACK decoder every header block
 * goes through (what a block means is the role's: a request,
 * request-blocks.ts; a response, response-blocks.ts).
 *
 * Each DATA frame counts against its stream's window (reopened only as the
 * stream's consumer takes the bytes, stream-state.ts) and the connection's
 * (reopened as bytes arrive, and as large as every stream's together, so a
 * slow stream never holds the others back: each stream's window bounds
 * what it holds), and against the content-length its head said, if any.
 */
import { HpackDecoder, type FieldSink } from "./hpack-decoder.ts";
import type { Http2Role } from "./role.ts";
import type { StreamState } from "./stream-state.ts";
import { ConnectionError, ErrorCode, Flag } from "./wire.ts";

/** What the incoming side needs of its connection. */
export interface IncomingOwner {
  readonly role: Http2Role;
  readonly streams: ReadonlyMap<number, StreamState>;
  /** Streams this side reset lately (their late frames are dropped). */
  readonly recentlyReset: ReadonlySet<number>;
  /** Throws the ConnectionError a frame on stream `id` is when it was never opened. */
  mustBeOpened(id: number, what: string): void;
  /** A stream error the peer caused (`act`, what it did): the stream reset, counted with the peer's resets. */
  streamError(id: number, code: number, act: string): void;
  chargeControl(): void;
  /** Sends a WINDOW_UPDATE for the connection. */
  connectionWindowUpdate(increment: number): void;
}

/** A field sink that keeps nothing: a block read only for what it does to the HPACK table. */
const DISCARD: FieldSink = { field() {} };

export class Incoming {
  readonly decoder = new HpackDecoder();
  /** The connection's window for the peer's DATA: its size, what is left, what came since our last WINDOW_UPDATE. */
  private window: number;
  private unacked = 0;
  /** The DATA frame being read: its stream (undefined: dropped), its length, content bytes so far, END_STREAM. */
  private dataStream: StreamState | undefined;
  private dataLength = 0;
  private dataContent = 0;
  private dataEnds = false;

  constructor(
    private readonly owner: IncomingOwner,
    readonly windowSize: number,
  ) {
    this.window = windowSize;
  }

  /** Reads a header block only for what it does to the HPACK table (a stream no one is served on). */
  discard(block: Uint8Array): void {
    this.decoder.decode(block, 0, DISCARD);
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
    if (!s) return this.lateData(id);
    if (s.remoteEnded) return this.owner.streamError(id, ErrorCode.STREAM_CLOSED, "sent DATA after the stream's end");
    if (!s.finalHeadReceived) return this.owner.streamError(id, ErrorCode.PROTOCOL_ERROR, "sent DATA before the response head");
    s.recvWindow -= length;
    if (s.recvWindow < 0) return this.owner.streamError(id, ErrorCode.FLOW_CONTROL_ERROR, "sent past the stream's window");
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
    if (s.expectedLength >= 0 && s.bytesReceived + bytes.byteLength > s.expectedLength) {
      this.dataStream = undefined;
      return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR, "sent more body than its content-length");
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
    if (s.expectedLength >= 0 && s.bytesReceived !== s.expectedLength) return this.owner.streamError(s.id, ErrorCode.PROTOCOL_ERROR, "sent less body than its content-length");
    s.receivedEnd();
  }

  /** DATA for a stream that is not open: never opened (a connection error), or closed (see Http2Role.refusesLateData). */
  private lateData(id: number): void {
    this.owner.mustBeOpened(id, "DATA");
    if (this.owner.role.refusesLateData && !this.owner.recentlyReset.has(id)) this.owner.streamError(id, ErrorCode.STREAM_CLOSED, "sent DATA on a closed stream");
  }
}
