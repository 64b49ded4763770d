/**
 * The sending half of a connection, either side's: what its streams have
 * queued (heads, body bytes, ends and trailers) goes out as the peer's
 * windows, its SETTINGS_MAX_FRAME_SIZE and the socket allow, and header
 * blocks are HPACK-coded at the moment they are framed, so the peer's table
 * follows ours frame by frame. A client's request heads go out as their
 * streams open, in the order of their ids, as RFC 9113 §5.1.1 asks.
 *
 * A stream waits in one of three places: for the socket (drained() sends
 * on), for the connection's window (a WINDOW_UPDATE on stream 0), or on
 * its own window. Waiting on a window is a stall the peer controls; a
 * server's sweep resets a stream stalled past the idle timeout
 * (expireStalled), so a client that never opens its windows holds neither
 * a stream nor its queued bytes for ever. Queued bytes are bounded for the
 * connection too (queued()).
 */
import { HpackEncoder } from "./hpack-encoder.ts";
import type { Output } from "./output.ts";
import type { StreamSession, StreamState } from "./stream-state.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, MAX_WINDOW, StreamError } from "./wire.ts";

/** What the sender needs of its connection. */
export interface SenderOwner {
  readonly closing: boolean;
  /** `s` is closed: the connection forgets it. */
  forget(s: StreamState): void;
  /** A stream this side reset: its late frames are dropped. */
  remember(id: number): void;
}

const EMPTY = new Uint8Array(0);

export class Sender implements StreamSession {
  readonly encoder = new HpackEncoder();
  /** The peer's window for our DATA on the connection; DATA went out since its last WINDOW_UPDATE. */
  private window = DEFAULT_WINDOW;
  private sentSinceUpdate = false;
  /** The peer's SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE (the latter at most H2_MAX_FRAME_SENT). */
  initialWindow = DEFAULT_WINDOW;
  maxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  /** Body bytes queued on all streams. */
  queuedBytes = 0;
  private readonly ioWaiters = new Set<StreamState>();
  private readonly windowWaiters = new Set<StreamState>();
  private readonly stalled = new Set<StreamState>();

  constructor(
    private readonly out: Output,
    private readonly owner: SenderOwner,
    readonly windowUpdateThreshold: number,
    private readonly maxQueuedBytes: number,
  ) {}

  /** The socket wrote what it held: streams waiting for it send on, in turn. */
  drained(): void {
    for (const s of this.ioWaiters) {
      if (this.out.blocked) break;
      this.ioWaiters.delete(s);
      this.flush(s);
    }
  }

  /** A WINDOW_UPDATE for the connection; false when no DATA of ours called for it (an unprompted one, for the flood budget). */
  connectionWindow(increment: number): boolean {
    const prompted = this.sentSinceUpdate;
    this.sentSinceUpdate = false;
    this.window += increment;
    if (this.window > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "the connection's window past 2^31-1");
    for (const s of this.windowWaiters) {
      if (this.window <= 0 || this.out.blocked) break;
      this.windowWaiters.delete(s);
      this.flush(s);
    }
    return prompted;
  }

  /** A WINDOW_UPDATE for `s`; false when unprompted. */
  streamWindow(s: StreamState, increment: number): boolean {
    const prompted = s.sentSinceUpdate;
    s.sentSinceUpdate = false;
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) throw new StreamError(s.id, ErrorCode.FLOW_CONTROL_ERROR, "a stream's window past 2^31-1");
    if (s.pendingBytes > 0 || s.heads.length > 0 || s.endQueued) this.flush(s);
    return prompted;
  }

  /** The peer's SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window moves by the difference (RFC 9113 §6.9.2). */
  setInitialWindow(value: number, streams: Iterable<StreamState>): void {
    const delta = value - this.initialWindow;
    this.initialWindow = value;
    if (delta === 0) return;
    const all = [...streams];
    for (const s of all) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "a stream's window past 2^31-1");
    }
    if (delta > 0) for (const s of all) if (s.pendingBytes > 0) this.flush(s);
  }

  /** Resets the streams whose windows have stayed shut since before `since`. */
  expireStalled(since: number): void {
    for (const s of this.stalled) if (s.stalledSince <= since) s.abort(ErrorCode.CANCEL);
  }

  /** A 431 answer of this side's own, on a stream that was never handed on (a header list too large). */
  answer431(id: number): void {
    this.out.headers(id, true, this.encoder.encode(431, []), this.maxFrameSize);
  }

  // -- StreamStateSession ------------------------------------------------------------------------------

  flush(s: StreamState): void {
    if (s.isClosed || this.owner.closing) return;
    if (this.out.blocked) {
      this.ioWaiters.add(s);
      return;
    }
    while (s.heads.length > 0) {
      const head = s.heads.shift()!;
      this.out.headers(s.id, head.end, this.encoder.encode(head.status, head.fields), this.maxFrameSize);
      if (head.end) {
        s.sentEnd();
        return s.allSent();
      }
    }
    let sent = false;
    while (s.pendingBytes > 0 && !this.out.blocked) {
      const window = Math.min(s.sendWindow, this.window);
      if (window <= 0) break;
      const chunk = s.pending[0]!;
      const n = Math.min(chunk.byteLength, window, this.maxFrameSize);
      let part = chunk;
      if (n === chunk.byteLength) s.pending.shift();
      else {
        part = chunk.subarray(0, n);
        s.pending[0] = chunk.subarray(n);
      }
      s.pendingBytes -= n;
      s.sendWindow -= n;
      this.window -= n;
      this.queuedBytes -= n;
      s.bytesSent += n;
      s.sentSinceUpdate = this.sentSinceUpdate = sent = true;
      // the last bytes of an ended body carry END_STREAM themselves
      const fin = s.pendingBytes === 0 && s.endQueued && s.trailers === undefined;
      this.out.data(s.id, fin, part);
      if (fin) {
        this.stalled.delete(s);
        s.sentEnd();
        return s.allSent();
      }
    }
    if (s.isClosed) return;
    if (s.pendingBytes > 0) {
      if (this.out.blocked) this.ioWaiters.add(s);
      else {
        if (this.window <= 0) this.windowWaiters.add(s);
        // waiting on a window the peer must open: the sweep's clock runs from the last progress
        if (sent || s.stalledSince === 0) s.stalledSince = performance.now();
        this.stalled.add(s);
      }
      return;
    }
    s.stalledSince = 0;
    this.stalled.delete(s);
    if (s.endQueued && !s.localEnded) {
      if (s.trailers) this.out.headers(s.id, true, this.encoder.encode(undefined, s.trailers), this.maxFrameSize);
      else this.out.data(s.id, true, EMPTY);
      s.sentEnd();
    }
    s.allSent();
  }

  queued(_s: StreamState, delta: number): boolean {
    this.queuedBytes += delta;
    return delta <= 0 || this.queuedBytes <= this.maxQueuedBytes;
  }

  sendReset(s: StreamState, code: number): void {
    if (this.owner.closing) return;
    this.out.rstStream(s.id, code);
    this.owner.remember(s.id);
  }

  sendWindowUpdate(s: StreamState, increment: number): void {
    if (!this.owner.closing) this.out.windowUpdate(s.id, increment);
  }

  forget(s: StreamState): void {
    this.ioWaiters.delete(s);
    this.windowWaiters.delete(s);
    this.stalled.delete(s);
    this.owner.forget(s);
  }
}
