/**
 * One HTTP/2 connection of a client, on the server's side (RFC 9113): the
 * preface and the SETTINGS exchange, frames read and answered, streams
 * handed to the handler as requests (incoming.ts), responses sent as the
 * windows allow (sender.ts), and the defences every HTTP/2 server facing
 * the internet needs, with the limits of limits.ts (docs/http2.md names
 * each attack and its defence).
 *
 * It never touches a socket: it is given an Http2Io and the socket's events
 * (received, drained, ended, closed), as HttpConnection is for HTTP/1.1.
 * Time limits are checked by one shared sweep a second (sweep.ts), which
 * refills the flood budgets too.
 *
 * Errors: a ConnectionError ends the connection with GOAWAY and its code; a
 * stream error resets its stream with RST_STREAM and counts against the
 * client's resets. Whatever a client sends, nothing throws out of
 * received().
 */
import { log } from "../log.ts";
import { Budget } from "./budget.ts";
import { FrameReader, type FrameSink } from "./frame-reader.ts";
import { HeaderBlocks } from "./header-blocks.ts";
import { Incoming, type IncomingOwner } from "./incoming.ts";
import { H2_MAX_QUEUED_CONTROL_BYTES, H2_RECENTLY_RESET, H2_STREAM_WINDOW, type Http2Limits } from "./limits.ts";
import { Output, type Http2Io } from "./output.ts";
import { applySettings } from "./peer-settings.ts";
import { Sender, type SenderOwner } from "./sender.ts";
import type { H2Stream, Peer } from "./stream.ts";
import { unwatch, watch, type Swept } from "./sweep.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Flag, FrameType, PREFACE, Setting, StreamError } from "./wire.ts";

/** Who serves the connection's requests. */
export interface Http2Handler {
  /** A request on a new stream: set its handlers now or after an await (its body waits, bounded by its window). */
  request(stream: H2Stream): void;
  /** The connection is gone (its streams were reset first). */
  closed?(): void;
}

const u32 = (b: Uint8Array, at: number): number => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
/** A stream id or a window increment: 31 bits, the reserved high bit ignored. */
const u31 = (b: Uint8Array, at: number): number => u32(b, at) & 0x7fffffff;

export class Http2ServerConnection implements FrameSink, SenderOwner, IncomingOwner, Swept {
  readonly streams = new Map<number, H2Stream>();
  /** Requests handed to the handler. */
  served = 0;
  /** Closing or closed: nothing more is read or served. */
  closing = false;
  readonly sender: Sender;
  readonly recentlyReset = new Set<number>();
  private readonly out: Output;
  private readonly incoming: Incoming;
  private readonly reader: FrameReader;
  private readonly blocks: HeaderBlocks;
  private readonly controlBudget: Budget;
  private readonly resetBudget: Budget;
  /** Bytes of the client's preface still to come; its first SETTINGS came; the ACK of ours is awaited since. */
  private prefaceLeft = PREFACE.byteLength;
  private settled = false;
  private ackDueSince: number;
  private readonly openedAt: number;
  private idleSince: number;
  private goawaySent = false;
  /** The client sent GOAWAY or half-closed: it opens no more streams. */
  private peerDone = false;
  private gone = false;

  constructor(
    io: Http2Io & { peer?: Peer },
    private readonly limits: Http2Limits,
    private readonly handler: Http2Handler,
  ) {
    this.out = new Output(io, H2_MAX_QUEUED_CONTROL_BYTES, () => this.cut());
    this.sender = new Sender(this.out, this, H2_STREAM_WINDOW / 2, limits.maxQueuedResponseBytes);
    this.incoming = new Incoming(this, limits, io.peer ?? { address: "", port: 0 });
    this.reader = new FrameReader(this, DEFAULT_MAX_FRAME_SIZE);
    this.blocks = new HeaderBlocks(limits.maxHeaderListBytes);
    this.controlBudget = new Budget(limits.maxControlFramesPerSecond);
    this.resetBudget = new Budget(limits.maxResetsPerSecond);
    this.openedAt = this.idleSince = this.ackDueSince = performance.now();
    // the server's preface: its SETTINGS, and the connection's window opened past the default
    this.out.settings([
      Setting.MAX_CONCURRENT_STREAMS, limits.maxConcurrentStreams,
      Setting.INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW,
      Setting.MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes,
      Setting.NO_RFC7540_PRIORITIES, 1,
    ]); // prettier-ignore
    this.out.windowUpdate(0, this.incoming.windowSize - DEFAULT_WINDOW);
    watch(this);
  }

  get acceptsStreams(): boolean {
    return !this.goawaySent && !this.peerDone;
  }

  // -- socket events -------------------------------------------------------------------------------

  /** Bytes from the client. */
  received(bytes: Uint8Array): void {
    if (this.closing) return;
    this.out.cork();
    try {
      let at = 0;
      if (this.prefaceLeft > 0) {
        at = this.readPreface(bytes);
        if (at < 0 || at === bytes.byteLength) return;
      }
      this.reader.push(at === 0 ? bytes : bytes.subarray(at));
    } catch (err) {
      this.failed(err);
    } finally {
      this.out.uncork(true);
    }
  }

  /** The socket wrote everything it held: streams waiting for it send on. */
  drained(): void {
    if (this.closing) return;
    this.out.drained();
    this.out.cork();
    try {
      this.sender.drained();
    } finally {
      this.out.uncork(true);
    }
  }

  /** The client half-closed: no frame follows. Requests not yet whole are reset; the others are answered, then the connection closes. */
  ended(): void {
    this.peerDone = true;
    for (const s of [...this.streams.values()]) if (!s.remoteEnded) s.abort(ErrorCode.CANCEL);
    this.closeIfDone();
  }

  /** The socket is gone: every stream is reset. */
  closed(): void {
    if (this.gone) return;
    this.gone = true;
    this.closing = true;
    unwatch(this);
    this.out.drop();
    this.resetAll(ErrorCode.CANCEL);
    this.handler.closed?.();
  }

  // -- what the edge does --------------------------------------------------------------------------

  /** Graceful close: GOAWAY, no new stream; the connection closes once the streams in flight are done (a drain, a restart). */
  goAway(): void {
    if (this.closing || this.goawaySent) return;
    this.goawaySent = true;
    this.out.goaway(this.incoming.highest, ErrorCode.NO_ERROR, "");
    this.closeIfDone();
  }

  /** Ends the connection now with `code` (GOAWAY, then close once it is written); streams in flight are reset. */
  close(code: number = ErrorCode.NO_ERROR, why = ""): void {
    if (this.closing) return;
    this.closing = true;
    this.out.goaway(this.incoming.highest, code, why);
    this.resetAll(code === ErrorCode.NO_ERROR ? ErrorCode.CANCEL : code);
    this.out.close();
  }

  /** @internal The sweep: budgets refilled, and every time limit checked against `now`. */
  tick(now: number): void {
    this.controlBudget.refill();
    this.resetBudget.refill();
    if (this.closing) return;
    const idle = this.limits.idleTimeoutMs;
    if (!this.settled) {
      if (now - this.openedAt >= idle) this.cut(); // no preface and SETTINGS in time
      return;
    }
    if (this.ackDueSince > 0 && now - this.ackDueSince >= idle) return this.close(ErrorCode.SETTINGS_TIMEOUT, "SETTINGS not acknowledged");
    if (this.blocks.stream !== 0 && now - this.blocks.since >= idle) return this.close(ErrorCode.ENHANCE_YOUR_CALM, "a header block not finished in time");
    if (this.streams.size === 0 && now - this.idleSince >= idle) return this.close(ErrorCode.NO_ERROR, "idle");
    // a window the client keeps shut: the response's bytes would wait (and hold memory) for ever
    this.sender.expireStalled(now - idle);
  }

  // -- frames in ----------------------------------------------------------------------------------------

  /** Checks the preface's bytes in `bytes`; returns where frames start, or -1 when it is not HTTP/2's preface. */
  private readPreface(bytes: Uint8Array): number {
    const from = PREFACE.byteLength - this.prefaceLeft;
    const n = Math.min(this.prefaceLeft, bytes.byteLength);
    for (let i = 0; i < n; i++) {
      if (bytes[i] === PREFACE[from + i]) continue;
      this.close(ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 connection preface");
      return -1;
    }
    this.prefaceLeft -= n;
    return n;
  }

  /** Whether a frame of `type` may come now: after the client's first SETTINGS, and outside a header block but for its CONTINUATION. */
  private expect(type: number, flags: number): void {
    if (!this.settled && (type !== FrameType.SETTINGS || flags & Flag.ACK)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "the first frame must be SETTINGS");
    if (this.blocks.stream !== 0 && type !== FrameType.CONTINUATION) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a frame inside a header block");
  }

  frame(type: number, flags: number, id: number, payload: Uint8Array): void {
    if (this.closing) return;
    this.expect(type, flags);
    try {
      switch (type) {
        case FrameType.HEADERS:
          if (this.blocks.headers(flags, id, payload)) this.incoming.headerBlock(id, this.blocks.endStream, this.blocks.fragment, this.blocks.selfDependent);
          return;
        case FrameType.CONTINUATION:
          if (payload.byteLength === 0) this.chargeControl();
          if (this.blocks.continuation(flags, id, payload)) this.incoming.headerBlock(id, this.blocks.endStream, this.blocks.take(), this.blocks.selfDependent);
          return;
        case FrameType.SETTINGS:
          return this.settings(flags, id, payload);
        case FrameType.PING:
          if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PING on a stream");
          if (payload.byteLength !== 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "PING of other than 8 bytes");
          this.chargeControl();
          if (!(flags & Flag.ACK)) this.out.pingAck(payload);
          return;
        case FrameType.WINDOW_UPDATE:
          return this.windowUpdate(id, payload);
        case FrameType.RST_STREAM:
          if (payload.byteLength !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "RST_STREAM of other than 4 bytes");
          if (id === 0 || id > this.incoming.highest) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "RST_STREAM on a stream not opened");
          // streams opened and reset in a loop (CVE-2023-44487) cost work each: counted
          this.chargeReset();
          this.streams.get(id)?.receivedReset(u32(payload, 0));
          return;
        case FrameType.PRIORITY:
          // RFC 7540's priorities are not followed (SETTINGS_NO_RFC7540_PRIORITIES): the frame is checked and dropped
          if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0");
          this.chargeControl();
          if (payload.byteLength !== 5) throw new StreamError(id, ErrorCode.FRAME_SIZE_ERROR, "PRIORITY of other than 5 bytes");
          if (u31(payload, 0) === id) throw new StreamError(id, ErrorCode.PROTOCOL_ERROR, "a stream depending on itself");
          return;
        case FrameType.GOAWAY:
          if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
          if (payload.byteLength < 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
          this.peerDone = true;
          return this.closeIfDone();
        case FrameType.PUSH_PROMISE:
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PUSH_PROMISE from a client");
        default:
          // frames of unknown types are ignored (RFC 9113 §4.1), but not for free
          this.chargeControl();
      }
    } catch (err) {
      if (!(err instanceof StreamError)) throw err;
      this.streamError(err.stream, err.code);
    }
  }

  dataStart(id: number, flags: number, length: number): void {
    if (this.closing) return;
    this.expect(FrameType.DATA, flags);
    this.incoming.dataStart(id, flags, length);
  }

  dataPiece(bytes: Uint8Array): void {
    if (!this.closing) this.incoming.dataPiece(bytes);
  }

  dataEnd(): void {
    if (!this.closing) this.incoming.dataEnd();
  }

  private settings(flags: number, id: number, payload: Uint8Array): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.byteLength !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload");
      this.ackDueSince = 0;
      return;
    }
    if (this.settled) this.chargeControl();
    this.settled = true;
    this.out.settingsAck();
    applySettings(payload, this.sender, this.streams.values());
  }

  private windowUpdate(id: number, payload: Uint8Array): void {
    if (payload.byteLength !== 4) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "WINDOW_UPDATE of other than 4 bytes");
    const increment = u31(payload, 0);
    if (id === 0) {
      if (increment === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
      // one that no DATA of ours called for asks work of us for nothing
      if (!this.sender.connectionWindow(increment)) this.chargeControl();
      return;
    }
    if (id > this.incoming.highest) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "WINDOW_UPDATE on a stream not opened");
    const s = this.streams.get(id);
    if (!s) return this.chargeControl();
    if (increment === 0) throw new StreamError(id, ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
    if (!this.sender.streamWindow(s, increment)) this.chargeControl();
  }

  // -- IncomingOwner: budgets, errors, what incoming sends --------------------------------------------

  request(s: H2Stream): void {
    this.served++;
    this.handler.request(s);
  }

  chargeControl(): void {
    if (!this.controlBudget.take()) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many control frames");
  }

  chargeReset(): void {
    if (!this.resetBudget.take()) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many streams reset");
  }

  streamError(id: number, code: number): void {
    const s = this.streams.get(id);
    if (s) s.abort(code);
    else this.rstStream(id, code);
    this.chargeReset();
  }

  connectionWindowUpdate(increment: number): void {
    this.out.windowUpdate(0, increment);
  }

  rstStream(id: number, code: number): void {
    this.out.rstStream(id, code);
    this.remember(id);
  }

  // -- SenderOwner ---------------------------------------------------------------------------------------

  forget(s: H2Stream): void {
    this.streams.delete(s.id);
    if (this.streams.size > 0) return;
    this.idleSince = performance.now();
    this.closeIfDone();
  }

  remember(id: number): void {
    this.recentlyReset.add(id);
    if (this.recentlyReset.size > H2_RECENTLY_RESET) this.recentlyReset.delete(this.recentlyReset.values().next().value!);
  }

  // -- the end ------------------------------------------------------------------------------------------

  private failed(err: unknown): void {
    if (err instanceof ConnectionError) return this.close(err.code, err.message);
    log.error("an HTTP/2 connection's handling failed: closing it", { err: String((err as Error)?.message ?? err).slice(0, 200) });
    this.close(ErrorCode.INTERNAL_ERROR, "");
  }

  /** Cuts the connection without a word: a client that does not read what it asks for, or never finished its preface (a stranger's doing: not logged). */
  private cut(): void {
    if (this.closing) return;
    this.closing = true;
    this.resetAll(ErrorCode.CANCEL);
    this.out.terminate();
  }

  private closeIfDone(): void {
    if (this.closing || this.streams.size > 0 || this.acceptsStreams) return;
    this.closing = true;
    this.out.close();
  }

  private resetAll(code: number): void {
    for (const s of [...this.streams.values()]) s.receivedReset(code);
  }
}
