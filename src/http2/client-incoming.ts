/**
 * The server's side of a client connection's streams: header blocks made
 * into response heads and trailers (checked by response-fields.ts, the
 * list bounded while HPACK decodes it), DATA into response bodies, with the
 * receive windows: each DATA frame counts against its stream's window
 * (reopened only as the stream's handler takes the bytes, client-stream.ts)
 * and the connection's (reopened as bytes arrive, so a slow stream never
 * holds the others back; each stream's window bounds what it holds). As
 * incoming.ts is for the server's connection.
 */
import type { H2ClientStream } from "./client-stream.ts";
import type { Http2ClientLimits } from "./client-limits.ts";
import { HpackDecoder, type FieldSink } from "./hpack-decoder.ts";
import { ResponseFields } from "./response-fields.ts";
import { ConnectionError, DEFAULT_WINDOW, ErrorCode, Flag, MAX_WINDOW } from "./wire.ts";

/** What the incoming side needs of its connection. */
export interface ClientIncomingOwner {
  readonly streams: ReadonlyMap<number, H2ClientStream>;
  /** Throws the ConnectionError a frame on stream `id` is when this side never opened it. */
  mustBeOpened(id: number, what: string): void;
  /** Sends a WINDOW_UPDATE for the connection. */
  connectionWindowUpdate(increment: number): void;
}

/** A field sink that keeps nothing: a block read only for what it does to the HPACK table. */
const DISCARD: FieldSink = { field() {} };

export class ClientIncoming {
  /** The connection's receive window: its size, what is left, what came since our last WINDOW_UPDATE. */
  readonly windowSize: number;
  private window: number;
  private unacked = 0;
  private readonly decoder = new HpackDecoder();
  /** The DATA frame being read: its stream (undefined: dropped), its length and content so far, END_STREAM. */
  private dataStream: H2ClientStream | undefined;
  private dataLength = 0;
  private dataContent = 0;
  private dataEnds = false;

  constructor(
    private readonly owner: ClientIncomingOwner,
    private readonly limits: Http2ClientLimits,
  ) {
    this.windowSize = Math.min(MAX_WINDOW, Math.max(DEFAULT_WINDOW, limits.maxStreams * limits.streamWindow));
    this.window = this.windowSize;
  }

  // -- DATA ---------------------------------------------------------------------------------------------

  dataStart(id: number, flags: number, length: number): void {
    this.dataStream = undefined;
    // the connection's window counts every DATA byte, padding and dropped frames included, and reopens at once
    this.window -= length;
    if (this.window < 0) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "DATA past the connection's window");
    this.unacked += length;
    if (this.unacked >= this.windowSize / 2) {
      this.owner.connectionWindowUpdate(this.unacked);
      this.window += this.unacked;
      this.unacked = 0;
    }
    this.owner.mustBeOpened(id, "DATA");
    const s = this.owner.streams.get(id);
    if (!s) return; // one this side reset: its late frames are dropped
    if (s.remoteEnded) return s.fail(ErrorCode.STREAM_CLOSED, "the service sent DATA after the stream's end");
    if (!s.finalSeen) return s.fail(ErrorCode.PROTOCOL_ERROR, "the service sent DATA before the response head");
    s.recvWindow -= length;
    if (s.recvWindow < 0) return s.fail(ErrorCode.FLOW_CONTROL_ERROR, "the service sent past the stream's window");
    this.dataStream = s;
    this.dataLength = length;
    this.dataContent = 0;
    this.dataEnds = (flags & Flag.END_STREAM) !== 0;
  }

  dataPiece(bytes: Uint8Array): void {
    const s = this.dataStream;
    if (!s) return;
    this.dataContent += bytes.byteLength;
    s.receivedData(bytes);
    if (s.isClosed) this.dataStream = undefined;
  }

  dataEnd(): void {
    const s = this.dataStream;
    this.dataStream = undefined;
    if (!s || s.isClosed) return;
    s.creditNow(this.dataLength - this.dataContent);
    if (this.dataEnds) s.receivedEnd();
  }

  // -- header blocks -------------------------------------------------------------------------------------

  /** A whole header block on stream `id`: a response head, or its trailers. */
  headerBlock(id: number, endStream: boolean, block: Uint8Array): void {
    this.owner.mustBeOpened(id, "HEADERS");
    const s = this.owner.streams.get(id);
    if (!s) return void this.decoder.decode(block, 0, DISCARD); // read for the table alone
    const trailers = s.finalSeen;
    const fields = new ResponseFields(trailers);
    const within = this.decoder.decode(block, this.limits.maxHeaderListBytes, fields);
    fields.finish();
    if (s.remoteEnded) return s.fail(ErrorCode.STREAM_CLOSED, "the service sent HEADERS after the stream's end");
    if (!within) return s.fail(ErrorCode.CANCEL, `the service's response ${trailers ? "trailers" : "head"} is larger than ${this.limits.maxHeaderListBytes} bytes`);
    if (fields.fault !== undefined) return s.fail(ErrorCode.PROTOCOL_ERROR, `the service's response is malformed: ${fields.fault}`);
    // after the final head, a header block is the trailer section, which ends the stream (RFC 9113 §8.1)
    if (trailers) {
      if (!endStream) return s.fail(ErrorCode.PROTOCOL_ERROR, "the service's response is malformed: trailers that do not end the stream");
      return s.receivedEnd(fields.fields);
    }
    s.receivedHead(fields.status, fields.fields, endStream);
  }
}
