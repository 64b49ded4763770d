/**
 * One HTTP/2 connection to a server, on the client's side (RFC 9113), with
 * prior knowledge (h2c) or after TLS's ALPN said h2: the preface and the
 * SETTINGS exchange, requests opened as streams (client-stream.ts), their
 * bodies sent as the server's windows allow (client-sender.ts), responses
 * read and checked (response-fields.ts) and handed to each stream's
 * handler as they come. It reuses the server engine's parts: the frame
 * reader, header blocks, HPACK and the batched output.
 *
 * Like the server connection it never touches a socket: it is given an
 * Http2Io and the socket's events (received, drained, closed). Its owner
 * opens streams while `available` says it may (the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS and ours, a socket that takes bytes, no
 * GOAWAY), and hears when more may be opened and when the connection is
 * over. Time limits are checked by the engine's one sweep a second.
 *
 * Errors: what the server sends wrong is a ConnectionError (GOAWAY with its
 * code, every stream told why) or, for one stream, that stream reset with
 * its reason. Whatever the server sends, nothing throws out of received().
 */
import { ClientIncoming, type ClientIncomingOwner } from "./client-incoming.ts";
import { ClientSender } from "./client-sender.ts";
import { applyServerSettings } from "./client-settings.ts";
import { H2ClientStream, type ClientStreamSession, type Fields, type H2ResponseHandler } from "./client-stream.ts";
import { H2_CLIENT_MAX_QUEUED_BYTES, type Http2ClientLimits } from "./client-limits.ts";
import { FrameReader, type FrameSink } from "./frame-reader.ts";
import { HeaderBlocks } from "./header-blocks.ts";
import { Output, type Http2Io } from "./output.ts";
import { unwatch, watch, type Swept } from "./sweep.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, errorName, Flag, FrameType, MAX_STREAM_ID, PREFACE, Setting, StreamError } from "./wire.ts";

/** Who uses the connection. */
export interface Http2ClientOwner {
  /** More streams may be opened now (the server's SETTINGS came, a stream closed, the socket drained, a GOAWAY came: look at `available` and `acceptsStreams`). */
  slots(): void;
  /** The connection is over (its streams were told first); `why` in words; `ready`: the server's SETTINGS had come. */
  closed(why: string, ready: boolean): void;
  /** Streams are open (true) or none is (false): an idle connection should not keep a process alive. */
  busy?(yes: boolean): void;
}

const u32 = (b: Uint8Array, at: number): number => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
const u31 = (b: Uint8Array, at: number): number => u32(b, at) & 0x7fffffff;
/** What an HTTP/1.1 server answers a preface with starts so. */
const H = 0x48;

export class Http2ClientConnection implements FrameSink, ClientStreamSession, ClientIncomingOwner, Swept {
  readonly streams = new Map<number, H2ClientStream>();
  /** The server's SETTINGS came: streams may be opened. */
  ready = false;
  /** Closing or closed: nothing more is read or opened. */
  closing = false;
  readonly windowUpdateThreshold: number;
  private readonly out: Output;
  private readonly sender: ClientSender;
  private readonly reader: FrameReader;
  private readonly blocks: HeaderBlocks;
  private readonly incoming: ClientIncoming;
  private nextId = 1;
  private peerMaxStreams = Number.POSITIVE_INFINITY;
  private goneAway = false;
  private gone = false;
  private firstByte = -1;
  private readonly openedAt: number;
  private idleSince: number;
  private slotsDue = false;
  private readonly tellSlots = () => {
    this.slotsDue = false;
    if (!this.closing) this.owner.slots();
  };

  constructor(
    io: Http2Io,
    private readonly limits: Http2ClientLimits,
    private readonly owner: Http2ClientOwner,
  ) {
    this.out = new Output(io, H2_CLIENT_MAX_QUEUED_BYTES, () => this.finish("the service does not read what the agent sends", true));
    this.sender = new ClientSender(this.out);
    this.reader = new FrameReader(this, DEFAULT_MAX_FRAME_SIZE);
    this.blocks = new HeaderBlocks(limits.maxHeaderListBytes);
    this.incoming = new ClientIncoming(this, limits);
    this.windowUpdateThreshold = limits.streamWindow / 2;
    this.openedAt = this.idleSince = performance.now();
    // the client's preface: the magic, then its SETTINGS (the server's may come in any order with ours)
    io.write(PREFACE);
    this.out.settings([
      Setting.ENABLE_PUSH, 0,
      Setting.INITIAL_WINDOW_SIZE, limits.streamWindow,
      Setting.MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes,
    ]); // prettier-ignore
    if (this.incoming.windowSize > DEFAULT_WINDOW) this.out.windowUpdate(0, this.incoming.windowSize - DEFAULT_WINDOW);
    watch(this);
  }

  /** New streams may be opened on it (now or once it drains): ready, no GOAWAY, not closing, ids left. */
  get acceptsStreams(): boolean {
    return this.ready && !this.goneAway && !this.closing && this.nextId <= MAX_STREAM_ID;
  }

  /** How many streams may be opened now. */
  get available(): number {
    if (!this.acceptsStreams || this.out.blocked) return 0;
    return Math.max(0, Math.min(this.peerMaxStreams, this.limits.maxStreams) - this.streams.size);
  }

  /**
   * Opens a stream with the request head `fields` (pseudo-header fields
   * first), ending it at once when `endStream` (no body). Only while
   * `available` is above 0.
   */
  open(fields: Fields, endStream: boolean, handler: H2ResponseHandler): H2ClientStream {
    if (this.available <= 0) throw new Error("no stream may be opened on this connection now");
    const id = this.nextId;
    this.nextId += 2;
    const s = new H2ClientStream(this, id, handler, this.limits.streamWindow, this.sender.initialWindow);
    this.streams.set(id, s);
    if (this.streams.size === 1) this.owner.busy?.(true);
    this.out.cork();
    try {
      this.sender.head(s, fields, endStream);
    } finally {
      this.out.uncork();
    }
    return s;
  }

  // -- socket events -------------------------------------------------------------------------------

  /** Bytes from the server. */
  received(bytes: Uint8Array): void {
    if (this.closing || bytes.byteLength === 0) return;
    if (this.firstByte < 0) this.firstByte = bytes[0]!;
    this.out.cork();
    try {
      this.reader.push(bytes);
    } catch (err) {
      this.failed(err);
    } finally {
      this.out.uncork(true);
    }
  }

  /** The socket wrote everything it held: streams waiting for it send on, and more may open. */
  drained(): void {
    if (this.closing) return;
    this.out.drained();
    this.out.cork();
    try {
      this.sender.drained();
    } finally {
      this.out.uncork(true);
    }
    this.slotsSoon();
  }

  /** The socket is gone (the server closed it, or it broke): every stream is told. */
  closed(why = "the service closed the connection"): void {
    this.finish(why, false);
  }

  // -- what the owner does ----------------------------------------------------------------------------

  /** Ends the connection now with `code` (GOAWAY, then close once it is written); streams in flight end with `why`. */
  close(code: number = ErrorCode.NO_ERROR, why = "the connection was closed"): void {
    if (this.closing) return;
    this.out.goaway(0, code, code === ErrorCode.NO_ERROR ? "" : why);
    this.finish(why, false, true);
  }

  /** @internal The sweep: the server's SETTINGS in time, and an idle connection closed. */
  tick(now: number): void {
    if (this.closing) return;
    if (!this.ready) {
      const wait = this.limits.settingsTimeoutMs;
      if (now - this.openedAt >= wait) this.close(ErrorCode.SETTINGS_TIMEOUT, `no HTTP/2 SETTINGS from the service within ${Math.round(wait / 1000)} s: does it speak HTTP/2?`);
      return;
    }
    if (this.streams.size === 0 && now - this.idleSince >= this.limits.idleTimeoutMs) this.close(ErrorCode.NO_ERROR, "idle");
  }

  // -- frames in ----------------------------------------------------------------------------------------

  frame(type: number, flags: number, id: number, payload: Uint8Array): void {
    if (this.closing) return;
    if (!this.ready && (type !== FrameType.SETTINGS || flags & Flag.ACK)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "the server's first frame must be SETTINGS");
    if (this.blocks.stream !== 0 && type !== FrameType.CONTINUATION) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a frame inside a header block");
    try {
      switch (type) {
        case FrameType.HEADERS:
          if (this.blocks.headers(flags, id, payload)) this.incoming.headerBlock(id, this.blocks.endStream, this.blocks.fragment);
          return;
        case FrameType.CONTINUATION:
          if (this.blocks.continuation(flags, id, payload)) this.incoming.headerBlock(id, this.blocks.endStream, this.blocks.take());
          return;
        case FrameType.SETTINGS:
          return this.settings(flags, id, payload);
        case FrameType.PING:
          if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
          if (payload.byteLength !== 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING of other than 8 bytes");
          if (!(flags & Flag.ACK)) this.out.pingAck(payload);
          return;
        case FrameType.WINDOW_UPDATE:
          return this.windowUpdate(id, payload);
        case FrameType.RST_STREAM:
          if (payload.byteLength !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM of other than 4 bytes");
          this.mustBeOpened(id, "RST_STREAM");
          this.streams.get(id)?.receivedReset(u32(payload, 0));
          return;
        case FrameType.GOAWAY:
          return this.goaway(id, payload);
        case FrameType.PUSH_PROMISE:
          // this side's SETTINGS_ENABLE_PUSH is 0 (RFC 9113 §8.4)
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE though push is off");
        default:
          // PRIORITY and frames of unknown types are ignored (RFC 9113 §4.1, §5.3.2)
          return;
      }
    } catch (err) {
      if (!(err instanceof StreamError)) throw err;
      this.streams.get(err.stream)?.fail(err.code, `the service broke HTTP/2 on the stream: ${err.message}`);
    }
  }

  dataStart(id: number, flags: number, length: number): void {
    if (this.closing) return;
    if (!this.ready || this.blocks.stream !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA out of place");
    this.incoming.dataStart(id, flags, length);
  }

  dataPiece(bytes: Uint8Array): void {
    if (!this.closing) this.incoming.dataPiece(bytes);
  }

  dataEnd(): void {
    if (!this.closing) this.incoming.dataEnd();
  }

  /** A frame on a stream must name one this side opened. */
  mustBeOpened(id: number, what: string): void {
    if (id === 0 || id % 2 === 0 || id >= this.nextId) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on stream ${id}, which this side did not open`);
  }

  private settings(flags: number, id: number, payload: Uint8Array): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.byteLength !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload");
      return;
    }
    const maxStreams = applyServerSettings(payload, this.sender, this.streams.values());
    if (maxStreams !== undefined) this.peerMaxStreams = maxStreams;
    this.out.settingsAck();
    this.ready = true;
    this.slotsSoon();
  }

  private windowUpdate(id: number, payload: Uint8Array): void {
    if (payload.byteLength !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of other than 4 bytes");
    const increment = u31(payload, 0);
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
      return this.sender.connectionWindow(increment);
    }
    this.mustBeOpened(id, "WINDOW_UPDATE");
    const s = this.streams.get(id);
    if (!s) return;
    if (increment === 0) throw new StreamError(id, ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
    this.sender.streamWindow(s, increment);
  }

  /** The server opens no more streams of ours: those past its last were never processed, and may go elsewhere. */
  private goaway(id: number, payload: Uint8Array): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
    if (payload.byteLength < 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
    const last = u31(payload, 0);
    const code = u32(payload, 4);
    this.goneAway = true;
    const why = `the service went away (GOAWAY ${errorName(code)})`;
    for (const s of [...this.streams.values()]) if (s.id > last) s.fail(undefined, why, true);
    this.slotsSoon();
    if (this.streams.size === 0) this.close(ErrorCode.NO_ERROR, why);
  }

  // -- ClientStreamSession ---------------------------------------------------------------------------

  flush(s: H2ClientStream): void {
    if (!this.closing) this.sender.flush(s);
  }

  sendReset(s: H2ClientStream, code: number): void {
    if (!this.closing) this.out.rstStream(s.id, code);
  }

  sendWindowUpdate(s: H2ClientStream, increment: number): void {
    if (!this.closing) this.out.windowUpdate(s.id, increment);
  }

  connectionWindowUpdate(increment: number): void {
    this.out.windowUpdate(0, increment);
  }

  forget(s: H2ClientStream): void {
    this.sender.forget(s);
    this.streams.delete(s.id);
    if (this.streams.size > 0 || this.gone) return this.slotsSoon();
    this.idleSince = performance.now();
    this.owner.busy?.(false);
    // a connection the server said GOAWAY to closes once its last stream is done
    if (this.goneAway && !this.closing) return this.close(ErrorCode.NO_ERROR, "the service went away");
    this.slotsSoon();
  }

  // -- the end ------------------------------------------------------------------------------------------

  private slotsSoon(): void {
    if (this.slotsDue || this.closing) return;
    this.slotsDue = true;
    queueMicrotask(this.tellSlots);
  }

  private failed(err: unknown): void {
    if (!(err instanceof ConnectionError)) {
      const why = `the HTTP/2 client failed: ${String((err as Error)?.message ?? err).slice(0, 120)}`;
      this.out.goaway(0, ErrorCode.INTERNAL_ERROR, "");
      return this.finish(why, false, true);
    }
    // an HTTP/1.1 server answers the preface with a status line: say so rather than what its bytes look like as a frame
    const why =
      !this.ready && this.firstByte === H
        ? "the service answered in HTTP/1.1: it does not speak HTTP/2 with prior knowledge (h2c)"
        : `the service broke HTTP/2 (${errorName(err.code)}: ${err.message})`;
    this.out.goaway(0, err.code, err.message);
    this.finish(why, false, true);
  }

  /**
   * The one end of the connection: every stream told `why`, the socket
   * closed (`polite`: once what waits is written; else at once) or already
   * gone, the owner told once.
   */
  private finish(why: string, cut: boolean, polite = false): void {
    if (this.gone) return;
    this.gone = this.closing = true;
    unwatch(this);
    for (const s of [...this.streams.values()]) s.fail(undefined, why);
    if (polite) this.out.close();
    else if (cut) this.out.terminate();
    else this.out.drop();
    if (this.streams.size === 0) this.owner.busy?.(false);
    this.owner.closed(why, this.ready);
  }
}
