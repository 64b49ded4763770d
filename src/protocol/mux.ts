/**
 * Many streams over one message transport, each with its own credit window.
 *
 * The mux never touches a socket: it is given a `send` callback for frames
 * and is fed received messages through `receive()`. When `send` reports
 * backpressure, every stream stops sending until `drained()` is called.
 * A stream sends DATA only while it holds credit; the receiver returns credit
 * (WINDOW) only after its consumer has taken the bytes (`consumed()`), in
 * batches of half a window. So a consumer that stops reading stops only its
 * own stream, and memory per stream is bounded by the window.
 */
import {
  decodeFrames,
  type Frame,
  jsonPayload,
  parseJsonPayload,
  ProtocolError,
  readText,
  readU32,
  u32Payload,
  writeFrame,
} from "./frames.ts";
import {
  BATCH_BYTES,
  DEAD_AFTER_MS,
  FrameType,
  HEADER_LENGTH,
  MAX_HELD_BYTES,
  MAX_DATAGRAM,
  MAX_MESSAGE,
  INITIAL_WINDOW,
  KEEPALIVE_INTERVAL_MS,
  MAX_DATA_PAYLOAD,
  MAX_PAYLOAD,
  MAX_STREAM_ID,
  PING_BYTES,
  WINDOW_UPDATE_THRESHOLD,
  WireError,
  type FrameTypeValue,
} from "./wire.ts";

import { keepAlive, stopKeepingAlive, type KeptAlive } from "./keepalive.ts";
import { log } from "../log.ts";
import { giveBackScratch, lendScratch } from "./scratch.ts";
import { Stream, type StreamSession } from "./stream.ts";

export { Stream };

export type SendResult = "sent" | "backpressure" | "closed";

export interface MuxOptions {
  /** Sends one frame as one message. */
  send(frame: Uint8Array): SendResult;
  /** The edge opens even stream ids, the agent odd ones. */
  role: "edge" | "agent";
  /** The peer opened a stream; set its handlers now. */
  onStream?(stream: Stream): void;
  /** A control frame arrived: every one of wire.ts CONTROL_FRAMES (HELLO, READY, ERROR, GOAWAY, MOVE, DRAIN, ROTATION, REVOKE, POLICY, ADD, ADDED, REMOVE, REMOVED, CONFIG, STATUS, ASK, ANSWER, POLICY_PASSED) but PING and PONG, which are the mux's own: keepAlive(), onPong. */
  onControl?(type: FrameTypeValue, payload: Uint8Array): void;
  /** The mux is closed (by close() or a protocol error); close the transport. */
  onClose?(code: string, message: string): void;
  /** The PONG to one of our PINGs came back after `rttMs`: the round trip to the peer. */
  onPong?(rttMs: number): void;
  /**
   * A stream ended by a reset (for counting): `by` this side, the peer, or
   * the connection closing under it; `code` as the RST or close carried it.
   */
  onStreamReset?(code: string, by: "local" | "peer" | "closed"): void;
  /** Upper bound on streams open at once. */
  maxStreams?: number;
  initialWindow?: number;
  /** Largest DATA payload sent: MAX_DATA_PAYLOAD (the default) over a WebSocket, DIRECT_DATA_PAYLOAD over a direct link. At most MAX_PAYLOAD. */
  maxDataPayload?: number;
  /**
   * Frames produced outside a cork() leave together at the end of the event
   * loop's turn, in one write, instead of one write each. A turn often
   * brings many ready sockets (visitor requests at the edge, local answers at
   * the agent), each making a frame or two; one write for all of them, and
   * one read on the other side, cut the CPU per request of the HTTP and TCP
   * paths by about a fifth. A batch reaching BATCH_BYTES still leaves at once.
   */
  batchWrites?: boolean;
}

/** A mux's liveness (keepAlive()): how often it pings, and how long a silent peer lives. */
export interface KeepaliveOptions {
  /** Default KEEPALIVE_INTERVAL_MS. */
  intervalMs?: number;
  /** Default DEAD_AFTER_MS. */
  deadAfterMs?: number;
}


/** Why open() made no stream: the mux closed, too many streams open at once, or no stream id left on this connection. */
export class OpenRefused extends Error {
  override name = "OpenRefused";
  constructor(
    readonly reason: "closed" | "too-many-streams" | "ids-exhausted",
    message: string,
  ) {
    super(message);
  }
}

export class Mux implements KeptAlive, StreamSession {
  readonly streams = new Map<number, Stream>();
  lastReceivedAt = Date.now();
  closed = false;
  readonly initialWindow: number;
  /** Credit is returned in batches of half this mux's window (WINDOW_UPDATE_THRESHOLD for the default one). */
  readonly windowUpdateThreshold: number;
  private readonly maxDataPayload: number;
  private blocked = false;
  /** Streams that have bytes to send and are waiting for the transport. */
  private readonly waiting = new Set<Stream>();
  private nextId: number;
  /** Highest id the peer has opened; lower unknown ids are streams already gone. */
  private peerHighest = 0;
  /**
   * Every outgoing message is written here, then handed to send(), which
   * copies it (a WebSocket's send does): a buffer lent for the batch
   * (scratch.ts) instead of a fresh one per frame, which keeps garbage and
   * RSS down on bulk transfers, and none held while the connection is idle.
   * Inside cork(), and until the turn's end (batchWrites), frames accumulate
   * in it back to back.
   */
  private scratch: Uint8Array | undefined;
  private batchBytes = 0;
  private corked = 0;
  /** Frames received while held (hold()), handled in order by release(). */
  private held: Frame[] | undefined;
  private heldBytes = 0;
  /** Set by keepAlive(): the schedule and when the last PING left. */
  private liveness: { intervalMs: number; deadAfterMs: number; pingedAt: number } | undefined;

  constructor(private readonly opts: MuxOptions) {
    this.nextId = opts.role === "edge" ? 2 : 1;
    this.initialWindow = opts.initialWindow ?? INITIAL_WINDOW;
    // relative to the window in use: a fixed threshold above a small window would never be reached
    this.windowUpdateThreshold = Math.max(1, Math.floor(this.initialWindow * (WINDOW_UPDATE_THRESHOLD / INITIAL_WINDOW)));
    this.maxDataPayload = opts.maxDataPayload ?? MAX_DATA_PAYLOAD;
    if (this.maxDataPayload < 1 || this.maxDataPayload > MAX_PAYLOAD) throw new RangeError(`maxDataPayload ${this.maxDataPayload} is not within 1..${MAX_PAYLOAD}`);
  }

  get streamCount(): number {
    return this.streams.size;
  }

  /** Opens a stream to the peer; `meta` travels in the OPEN frame. `end`: nothing will follow from this side. Throws OpenRefused when it cannot. */
  open(meta: unknown, end = false): Stream {
    if (this.closed) throw new OpenRefused("closed", "mux is closed");
    if (this.streams.size >= (this.opts.maxStreams ?? 4096)) throw new OpenRefused("too-many-streams", "too many open streams");
    const id = this.nextId;
    if (id > MAX_STREAM_ID) throw new OpenRefused("ids-exhausted", "stream ids exhausted");
    this.nextId += 2;
    const stream = new Stream(this, id, meta);
    this.streams.set(id, stream);
    const payload = jsonPayload(meta);
    stream.metaBytes = payload.byteLength;
    this.sendFrame(FrameType.OPEN, id, payload, end);
    if (end) stream.endedWithFrame();
    return stream;
  }

  /** Control frames leave at once when nothing corks them, batching or not: a GOAWAY is often the last thing said before the transport closes. */
  sendControl(type: FrameTypeValue, value?: unknown): void {
    this.sendEncodedControl(type, value === undefined ? undefined : jsonPayload(value));
  }

  /** sendControl with its JSON already encoded (a message sent often whose bytes are mostly known). */
  sendEncodedControl(type: FrameTypeValue, payload: Uint8Array | undefined): void {
    this.sendFrame(type, 0, payload);
    if (this.corked === 0) this.flushBatch();
  }

  /**
   * A control frame that need not leave at once (a note for the peer's
   * inspector): it goes with the turn's batch, after the frames before it
   * and before the ones after, so it costs no write of its own. Without
   * batchWrites it leaves as any frame outside a cork() does.
   */
  sendEncodedControlInBatch(type: FrameTypeValue, payload: Uint8Array | undefined): void {
    this.sendFrame(type, 0, payload);
  }

  ping(): void {
    this.sendFrame(FrameType.PING, 0, u32Payload(Date.now() >>> 0));
  }

  /**
   * Keeps the connection's liveness here, for every user of the mux alike:
   * a PING every `intervalMs` (its PONG, like any frame, is a sign of
   * life), and a peer silent for `deadAfterMs` is dead: the mux fails with
   * KEEPALIVE_TIMEOUT (an ERROR the peer sees should it come back), and its
   * owner's onClose drops the transport. Both sides ping, so each finds a
   * dead peer on its own, whatever the other does. Call it once the
   * transport is open; it ends when the mux closes.
   */
  keepAlive(opts: KeepaliveOptions = {}): void {
    if (this.closed || this.liveness) return;
    const now = Date.now();
    this.lastReceivedAt = now;
    this.liveness = { intervalMs: opts.intervalMs ?? KEEPALIVE_INTERVAL_MS, deadAfterMs: opts.deadAfterMs ?? DEAD_AFTER_MS, pingedAt: now };
    keepAlive(this, this.liveness.intervalMs);
  }

  /** @internal The keepalive clock's tick. */
  checkLiveness(now: number): void {
    const l = this.liveness;
    if (!l || this.closed) return;
    if (now - this.lastReceivedAt > l.deadAfterMs) {
      this.fail(WireError.KEEPALIVE_TIMEOUT, `no sign of life for ${l.deadAfterMs / 1000} s`);
      return;
    }
    if (now - l.pingedAt >= l.intervalMs) {
      l.pingedAt = now;
      this.ping();
    }
  }

  /** Feeds one received message. A bad frame closes the mux with PROTOCOL_ERROR; never throws. */
  receive(message: Uint8Array): void {
    if (this.closed) return;
    this.lastReceivedAt = Date.now();
    try {
      this.handle(message);
    } catch (err) {
      this.failed(err);
    }
  }

  /**
   * What a receive threw: a bad frame is the peer's PROTOCOL_ERROR; anything
   * else is a handler's bug, and the connection ends too (GOING_AWAY: the
   * agent connects again), because the frames after it in the message would
   * be lost, and with a byte stream its framing with them.
   */
  private failed(err: unknown): void {
    if (err instanceof ProtocolError) return this.fail(WireError.PROTOCOL_ERROR, err.message);
    log.error("a received frame's handler failed: closing the connection", { err: String((err as Error)?.message ?? err).slice(0, 200) });
    this.fail(WireError.GOING_AWAY, "an internal error on this side");
  }

  /**
   * Feeds one frame its transport decoded itself: a piece of a DATA frame
   * that reads of a byte stream cut (FrameReader). Like receive(), never throws.
   */
  receiveFrame(frame: Frame): void {
    if (this.closed) return;
    this.lastReceivedAt = Date.now();
    // corked by hand, not through cork(): this runs for every DATA piece, and a closure each adds up
    this.corked++;
    try {
      this.handleFrame(frame);
    } catch (err) {
      this.failed(err);
    } finally {
      if (--this.corked === 0 && !this.closed) this.uncorked();
    }
  }

  /** The transport has room again: streams resume in turn. */
  drained(): void {
    this.blocked = false;
    for (const s of [...this.waiting]) {
      if (this.blocked) break;
      this.waiting.delete(s);
      this.flush(s);
    }
  }

  /**
   * Runs `fn` with sending corked: the frames it produces leave as one
   * message when it returns (or sooner, at BATCH_BYTES). Used around the
   * handling of one received message and around a response head and its
   * body, so a small exchange costs one WebSocket message each way.
   */
  cork<T>(fn: () => T): T {
    this.corked++;
    try {
      return fn();
    } finally {
      if (--this.corked === 0) this.uncorked();
    }
  }

  /** Nothing holds the waiting frames any more: they leave now, or at the end of the turn (batchWrites). */
  private uncorked(): void {
    if (this.opts.batchWrites) this.flushAtEndOfTurn();
    else this.flushBatch();
  }

  private flushScheduled = false;
  private readonly scheduledFlush = () => {
    this.flushScheduled = false;
    this.flushBatch();
  };

  /** Sends what is waiting once this turn of the event loop has run its other callbacks. */
  private flushAtEndOfTurn(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    setImmediate(this.scheduledFlush);
  }

  /** Sends the waiting frames now, as one message. */
  flushBatch(): void {
    if (this.batchBytes === 0 || this.closed) return;
    const size = this.batchBytes;
    const scratch = this.scratch!;
    this.batchBytes = 0;
    this.scratch = undefined;
    const result = this.opts.send(scratch.subarray(0, size));
    giveBackScratch(scratch); // send() took its bytes (or a copy of them)
    if (result === "backpressure") this.blocked = true;
    else if (result === "closed") this.close(WireError.GOING_AWAY, "transport closed");
  }

  /**
   * @internal One datagram on stream `id`, in this turn's batch; false when it
   * must be dropped: over MAX_DATAGRAM, or the transport congested (the
   * streams' bytes must not wait behind datagrams, which may be lost).
   */
  sendDatagram(id: number, datagram: Uint8Array): boolean {
    if (this.closed || this.blocked || datagram.byteLength > MAX_DATAGRAM) return false;
    this.sendFrame(FrameType.DATAGRAM, id, datagram);
    return true;
  }

  /** Sends ERROR {code, message, ...extra} and closes. */
  fail(code: string, message: string, extra?: Record<string, unknown>): void {
    if (this.closed) return;
    this.sendFrame(FrameType.ERROR, 0, jsonPayload({ code, message, ...extra }));
    this.close(code, message);
  }

  /** Closes every stream (their owners see a reset) and the mux itself. */
  close(code: string = WireError.GOING_AWAY, message = "connection closed"): void {
    if (this.closed) return;
    this.flushBatch(); // what was already said (an ERROR, a last FIN) still goes out
    this.closed = true;
    if (this.liveness) stopKeepingAlive(this);
    for (const s of this.streams.values()) s.closedByMux(code);
    this.streams.clear();
    this.waiting.clear();
    this.opts.onClose?.(code, message);
  }

  // -- internals, used by Stream ----------------------------------------------------------

  /** @internal */
  streamReset(code: string, by: "local" | "peer" | "closed"): void {
    this.opts.onStreamReset?.(code, by);
  }

  /** @internal */
  sendFrame(type: FrameTypeValue, stream: number, payload?: Uint8Array, fin = false): void {
    if (this.closed) return;
    const size = HEADER_LENGTH + (payload?.byteLength ?? 0);
    if (this.scratch && this.batchBytes + size > this.scratch.byteLength) {
      if (this.scratch.byteLength < MAX_MESSAGE) this.growScratch(this.batchBytes + size);
      else this.flushBatch();
    }
    this.scratch ??= lendScratch(size);
    this.batchBytes += writeFrame(this.scratch!, this.batchBytes, type, stream, payload, fin);
    if (this.batchBytes >= BATCH_BYTES) this.flushBatch();
    else if (this.corked === 0) this.uncorked();
  }

  /** A batch outgrew its buffer: a bigger one (scratch.ts), the frames so far copied over. */
  private growScratch(needed: number): void {
    const old = this.scratch!;
    const grown = lendScratch(needed);
    grown.set(old.subarray(0, this.batchBytes));
    giveBackScratch(old);
    this.scratch = grown;
  }

  /** @internal Sends as much of the stream's pending bytes as credit and transport allow. */
  flush(s: Stream): void {
    while (s.pending.length > 0 && s.sendWindow > 0 && !this.blocked && !this.closed) {
      const head = s.pending[0]!;
      const n = Math.min(head.byteLength, s.sendWindow, this.maxDataPayload);
      let part: Uint8Array;
      if (n === head.byteLength) {
        part = head;
        s.pending.shift();
      } else {
        part = head.subarray(0, n);
        s.pending[0] = head.subarray(n);
      }
      s.sendWindow -= n;
      s.pendingBytes -= n;
      s.bytesSent += n;
      // the last queued bytes of an ended stream carry the FIN themselves
      const fin = s.pending.length === 0 && s.endIsQueued;
      this.sendFrame(FrameType.DATA, s.id, part, fin);
      if (fin) s.endedWithFrame(false);
    }
    if (this.closed) return;
    if (s.pending.length > 0) {
      // out of credit: WINDOW will flush it; transport blocked: drained() will
      if (this.blocked) this.waiting.add(s);
      return;
    }
    s.allSent();
  }

  /** @internal */
  forget(s: Stream): void {
    this.streams.delete(s.id);
    this.waiting.delete(s);
  }

  /**
   * Keeps the frames received from now on unhandled until release(): the
   * edge holds them while it checks a HELLO, so that what followed the
   * HELLO is answered after READY, in order.
   */
  hold(): void {
    this.held ??= [];
  }

  release(): void {
    const held = this.held;
    this.held = undefined;
    this.heldBytes = 0;
    if (!held || this.closed) return;
    try {
      this.cork(() => {
        for (const frame of held) this.handleFrame(frame);
      });
    } catch (err) {
      if (!(err instanceof ProtocolError)) throw err;
      this.fail(WireError.PROTOCOL_ERROR, err.message);
    }
  }

  private handle(message: Uint8Array): void {
    // whatever the frames of one message make us say (PONG, WINDOW, RST...) leaves as one message
    this.corked++;
    try {
      decodeFrames(message, this.handleFrame);
    } finally {
      if (--this.corked === 0) this.uncorked();
    }
  }

  private readonly handleFrame = (frame: Frame): void => {
    if (this.closed) return;
    if (this.held) {
      this.heldBytes += frame.payload.byteLength + HEADER_LENGTH;
      if (this.heldBytes > MAX_HELD_BYTES) throw new ProtocolError(`more than ${MAX_HELD_BYTES} bytes sent before READY`);
      // the payload may be a view of a buffer the transport reuses
      this.held.push({ ...frame, payload: frame.payload.slice() });
      return;
    }
    const { type, stream: id, payload, fin } = frame;
    switch (type) {
      case FrameType.PING:
      case FrameType.PONG:
        // the documented size, on every link and before a HELLO too: an echo is never bigger than what it answers
        if (payload.byteLength !== PING_BYTES) throw new ProtocolError(`${type === FrameType.PING ? "PING" : "PONG"} payload must be ${PING_BYTES} bytes, got ${payload.byteLength}`);
        if (type === FrameType.PING) return this.sendFrame(FrameType.PONG, 0, payload);
        // our PING carried our clock's low 32 bits of milliseconds; a PONG echoes it
        if (this.opts.onPong) {
          const sent = new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
          const rtt = ((Date.now() >>> 0) - sent) >>> 0;
          if (rtt < 600_000) this.opts.onPong(rtt);
        }
        return;
      case FrameType.HELLO:
      case FrameType.READY:
      case FrameType.ERROR:
      case FrameType.GOAWAY:
      case FrameType.MOVE:
      case FrameType.DRAIN:
      case FrameType.ROTATION:
      case FrameType.REVOKE:
      case FrameType.POLICY:
      case FrameType.ADD:
      case FrameType.ADDED:
      case FrameType.REMOVE:
      case FrameType.REMOVED:
      case FrameType.CONFIG:
      case FrameType.STATUS:
      case FrameType.ASK:
      case FrameType.ANSWER:
      case FrameType.POLICY_PASSED:
        this.opts.onControl?.(type, payload);
        return;
      case FrameType.OPEN:
        this.accept(id, payload);
        if (fin) this.streams.get(id)?.receivedFin();
        return;
    }
    const s = this.streams.get(id);
    if (!s) {
      if (this.isPastStream(id)) return; // a late frame for a stream that has already ended
      throw new ProtocolError(`frame for stream ${id}, which was never opened`);
    }
    switch (type) {
      case FrameType.REPLY:
        s.metaBytes += payload.byteLength;
        s.receivedReply(parseJsonPayload(payload, "REPLY"));
        if (fin) s.receivedFin();
        return;
      case FrameType.DATA:
        s.receivedData(payload);
        if (fin) s.receivedFin();
        return;
      case FrameType.DATAGRAM:
        if (payload.byteLength > MAX_DATAGRAM) throw new ProtocolError(`a datagram of ${payload.byteLength} bytes exceeds ${MAX_DATAGRAM}`);
        return s.receivedDatagram(payload);
      case FrameType.WINDOW:
        return s.receivedWindow(readU32(payload, "WINDOW"));
      case FrameType.FIN:
        return s.receivedFin();
      case FrameType.RST:
        return s.receivedReset(readText(payload) || WireError.CANCELLED);
    }
  };

  private isPastStream(id: number): boolean {
    const ownParity = this.opts.role === "edge" ? 0 : 1;
    return id % 2 === ownParity ? id < this.nextId : id <= this.peerHighest;
  }

  private accept(id: number, payload: Uint8Array): void {
    const peerParity = this.opts.role === "edge" ? 1 : 0;
    if (id % 2 !== peerParity) throw new ProtocolError(`peer opened stream ${id} with the wrong parity`);
    if (id <= this.peerHighest) throw new ProtocolError(`peer reused stream id ${id}`);
    this.peerHighest = id;
    const meta = parseJsonPayload(payload, "OPEN");
    const s = new Stream(this, id, meta);
    if (this.streams.size >= (this.opts.maxStreams ?? 4096) || !this.opts.onStream) {
      s.reset(WireError.UPSTREAM_FAILED);
      return;
    }
    this.streams.set(id, s);
    this.opts.onStream(s);
  }
}
