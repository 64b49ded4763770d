/**
 * One end of an HTTP/2 connection (RFC 9113), the part both ends share:
 * the preface, the SETTINGS exchange both ways, frames read and checked,
 * PING answered, windows opened, resets and GOAWAY read, stream errors
 * made resets, what streams queue sent as the windows allow (sender.ts),
 * DATA handed to its stream (incoming.ts), and the flood budgets. The
 * server's end (connection.ts) and the client's (client-connection.ts)
 * are this with a role (role.ts) and what is theirs alone: how streams
 * are opened and what their header blocks mean, the clocks, and how the
 * end is told.
 *
 * It never touches a socket: it is given an Http2Io and the socket's
 * events. Time limits are checked by one shared sweep a second (sweep.ts),
 * which refills the budgets too.
 *
 * Errors: a ConnectionError ends the connection with GOAWAY and its code
 * (failed()); a stream error resets its stream with RST_STREAM and counts
 * against the peer's resets. Whatever the peer sends, nothing throws out of
 * received().
 */
import { Budget } from "./budget.ts";
import { FrameReader, type FrameSink } from "./frame-reader.ts";
import { HeaderBlocks } from "./header-blocks.ts";
import { Incoming, type IncomingOwner } from "./incoming.ts";
import { H2_RECENTLY_RESET } from "./limits.ts";
import { Output, type Http2Io } from "./output.ts";
import { applySettings } from "./peer-settings.ts";
import type { Http2Role } from "./role.ts";
import { Sender, type SenderOwner } from "./sender.ts";
import type { StreamState } from "./stream-state.ts";
import { watch, type Swept } from "./sweep.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, Flag, FrameType, PREFACE, StreamError } from "./wire.ts";

/** The bounds one end holds its connection to, from its side's limits. */
export interface EndpointBounds {
  /** This end's SETTINGS, as [id, value, id, value...]. */
  settings: readonly number[];
  /** A header block's bytes (a list decodes to no less); SETTINGS_MAX_HEADER_LIST_SIZE. */
  maxHeaderListBytes: number;
  /** Each stream's receive window (this end's SETTINGS_INITIAL_WINDOW_SIZE); credit returns in halves of it. */
  streamWindow: number;
  /** The connection's receive window. */
  connectionWindow: number;
  /** Frames this end may queue while the peer does not read; past it the connection is cut. */
  maxQueuedControlBytes: number;
  /** Body bytes the streams may queue together; a stream writing past it is reset. */
  maxQueuedBytes: number;
  /** The flood budgets: frames that carry no request, and streams reset, a second (bursts of twice that). */
  maxControlFramesPerSecond: number;
  maxResetsPerSecond: number;
}

const u32 = (b: Uint8Array, at: number): number => ((b[at]! << 24) | (b[at + 1]! << 16) | (b[at + 2]! << 8) | b[at + 3]!) >>> 0;
/** A stream id or a window increment: 31 bits, the reserved high bit ignored. */
const u31 = (b: Uint8Array, at: number): number => u32(b, at) & 0x7fffffff;

export abstract class Http2Endpoint<S extends StreamState> implements FrameSink, SenderOwner, IncomingOwner, Swept {
  readonly streams = new Map<number, S>();
  /** Closing or closed: nothing more is read or sent but the end. */
  closing = false;
  /** The peer's first SETTINGS came. */
  ready = false;
  /** The highest stream id opened on the connection (by the client, whichever end that is). */
  highest = 0;
  readonly sender: Sender;
  readonly incoming: Incoming;
  readonly recentlyReset = new Set<number>();
  protected readonly out: Output;
  protected readonly blocks: HeaderBlocks;
  protected readonly openedAt: number;
  protected idleSince: number;
  /** Since when the ACK of our SETTINGS is awaited (0: it came). */
  protected ackDueSince: number;
  private readonly reader: FrameReader;
  private readonly controlBudget: Budget;
  private readonly resetBudget: Budget;
  /** Bytes of the peer's preface still to come (a server's). */
  private prefaceLeft: number;

  constructor(
    io: Http2Io,
    readonly role: Http2Role,
    bounds: EndpointBounds,
  ) {
    this.out = new Output(io, bounds.maxQueuedControlBytes, () => this.overflowed());
    this.sender = new Sender(this.out, this, bounds.streamWindow / 2, bounds.maxQueuedBytes);
    this.incoming = new Incoming(this, bounds.connectionWindow);
    this.reader = new FrameReader(this, DEFAULT_MAX_FRAME_SIZE);
    this.blocks = new HeaderBlocks(bounds.maxHeaderListBytes);
    this.controlBudget = new Budget(bounds.maxControlFramesPerSecond);
    this.resetBudget = new Budget(bounds.maxResetsPerSecond);
    this.openedAt = this.idleSince = this.ackDueSince = performance.now();
    this.prefaceLeft = role.opensStreams ? 0 : PREFACE.byteLength;
    // this end's preface: the magic (a client's), its SETTINGS, and the connection's window opened past the default
    if (role.opensStreams) io.write(PREFACE);
    this.out.settings(bounds.settings);
    if (this.incoming.windowSize > DEFAULT_WINDOW) this.out.windowUpdate(0, this.incoming.windowSize - DEFAULT_WINDOW);
    watch(this);
  }

  // -- socket events -------------------------------------------------------------------------------

  /** Bytes from the peer. */
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

  /** @internal The sweep: budgets refilled, and every time limit of the end checked against `now`. */
  tick(now: number): void {
    this.controlBudget.refill();
    this.resetBudget.refill();
    if (!this.closing) this.checkClocks(now);
  }

  // -- what each end does its own way --------------------------------------------------------------

  /** A whole header block on stream `id`; `selfDependent`: its HEADERS named itself its dependency. */
  protected abstract headerBlock(id: number, endStream: boolean, block: Uint8Array, selfDependent: boolean): void;
  /** The peer's GOAWAY: it opens no more streams (`lastStream`: the last of ours it processed). */
  protected abstract receivedGoaway(lastStream: number, code: number): void;
  /** The peer's SETTINGS were applied (each time: `ready` is set from the first). */
  protected abstract settingsApplied(maxConcurrentStreams: number | undefined): void;
  /** The time limits, checked by the sweep while the connection is open. */
  protected abstract checkClocks(now: number): void;
  /** A ConnectionError (or a failure of this end's own) ended reading: the connection must end. */
  protected abstract failed(err: unknown): void;
  /** Frames queued for a peer that does not read passed the bound: the connection must be cut. */
  protected abstract overflowed(): void;
  /** `s` is closed: the end forgets it (SenderOwner). */
  abstract forget(s: StreamState): void;

  // -- frames in ----------------------------------------------------------------------------------------

  /** Checks the preface's bytes in `bytes`; returns where frames start, or -1 when it is not HTTP/2's preface. */
  private readPreface(bytes: Uint8Array): number {
    const from = PREFACE.byteLength - this.prefaceLeft;
    const n = Math.min(this.prefaceLeft, bytes.byteLength);
    for (let i = 0; i < n; i++) {
      if (bytes[i] === PREFACE[from + i]) continue;
      this.failed(new ConnectionError(ErrorCode.PROTOCOL_ERROR, "not an HTTP/2 connection preface"));
      return -1;
    }
    this.prefaceLeft -= n;
    return n;
  }

  /** Whether a frame of `type` may come now: after the peer's first SETTINGS, and outside a header block but for its CONTINUATION. */
  private expect(type: number, flags: number): void {
    if (!this.ready && (type !== FrameType.SETTINGS || flags & Flag.ACK)) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `the ${this.role.peer}'s first frame must be SETTINGS`);
    if (this.blocks.stream !== 0 && type !== FrameType.CONTINUATION) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "a frame inside a header block");
  }

  frame(type: number, flags: number, id: number, payload: Uint8Array): void {
    if (this.closing) return;
    this.expect(type, flags);
    try {
      switch (type) {
        case FrameType.HEADERS:
          if (this.blocks.headers(flags, id, payload)) this.headerBlock(id, this.blocks.endStream, this.blocks.fragment, this.blocks.selfDependent);
          return;
        case FrameType.CONTINUATION:
          if (payload.byteLength === 0) this.chargeControl();
          if (this.blocks.continuation(flags, id, payload)) this.headerBlock(id, this.blocks.endStream, this.blocks.take(), this.blocks.selfDependent);
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
          this.mustBeOpened(id, "RST_STREAM");
          // streams opened and reset in a loop (CVE-2023-44487) cost work each: counted
          this.chargeReset();
          this.streams.get(id)?.receivedReset(u32(payload, 0));
          return;
        case FrameType.PRIORITY:
          // RFC 7540's priorities are not followed (a server says SETTINGS_NO_RFC7540_PRIORITIES): the frame is checked and dropped
          if (id === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "PRIORITY on stream 0");
          this.chargeControl();
          if (payload.byteLength !== 5) throw new StreamError(id, ErrorCode.FRAME_SIZE_ERROR, "PRIORITY of other than 5 bytes");
          if (u31(payload, 0) === id) throw new StreamError(id, ErrorCode.PROTOCOL_ERROR, "a stream depending on itself");
          return;
        case FrameType.GOAWAY:
          if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "GOAWAY on a stream");
          if (payload.byteLength < 8) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "GOAWAY shorter than 8 bytes");
          return this.receivedGoaway(u31(payload, 0), u32(payload, 4));
        case FrameType.PUSH_PROMISE:
          throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, this.role.pushRefused);
        default:
          // frames of unknown types are ignored (RFC 9113 §4.1), but not for free
          this.chargeControl();
      }
    } catch (err) {
      if (!(err instanceof StreamError)) throw err;
      this.streamError(err.stream, err.code, `broke HTTP/2 on the stream: ${err.message}`);
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

  /** A frame on a stream must name one that was opened: odd (neither end pushes), and not past the highest. */
  mustBeOpened(id: number, what: string): void {
    if (id === 0 || (id & 1) === 0 || id > this.highest) {
      throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `${what} on stream ${id}, which ${this.role.opensStreams ? "this side" : "the client"} did not open`);
    }
  }

  private settings(flags: number, id: number, payload: Uint8Array): void {
    if (id !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS on a stream");
    if (flags & Flag.ACK) {
      if (payload.byteLength !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a SETTINGS ACK with a payload");
      this.ackDueSince = 0;
      return;
    }
    if (this.ready) this.chargeControl();
    this.out.settingsAck();
    const maxStreams = applySettings(payload, this.sender, this.streams.values(), this.role);
    this.ready = true;
    this.settingsApplied(maxStreams);
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
    const s = this.streams.get(id);
    if (!s) {
      this.mustBeOpened(id, "WINDOW_UPDATE");
      return this.chargeControl();
    }
    if (increment === 0) throw new StreamError(id, ErrorCode.PROTOCOL_ERROR, "a WINDOW_UPDATE of 0");
    if (!this.sender.streamWindow(s, increment)) this.chargeControl();
  }

  // -- budgets, errors, what the parts send -------------------------------------------------------------

  chargeControl(): void {
    if (!this.controlBudget.take()) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many control frames");
  }

  chargeReset(): void {
    if (!this.resetBudget.take()) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, "too many streams reset");
  }

  streamError(id: number, code: number, act: string): void {
    const s = this.streams.get(id);
    if (s) s.abort(code, act);
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

  /** A stream this end reset: its frames still in flight are dropped rather than taken for errors. */
  remember(id: number): void {
    this.recentlyReset.add(id);
    if (this.recentlyReset.size > H2_RECENTLY_RESET) this.recentlyReset.delete(this.recentlyReset.values().next().value!);
  }
}
