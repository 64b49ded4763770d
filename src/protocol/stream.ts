/**
 * One stream of a mux (mux.ts): its credit windows both ways, the bytes
 * queued for credit, and the handlers its owner sets. The mux routes frames
 * to it and sends what it asks; it never touches a socket either.
 */
import { jsonPayload, ProtocolError, textPayload, u32Payload } from "./frames.ts";
import { FrameType, WireError, type FrameTypeValue } from "./wire.ts";

/**
 * What a stream needs of the session it lives in (mux.ts's Mux): the one
 * way frames leave, the shared transport's turn, and word of its end.
 * Declared here so that stream.ts and mux.ts do not import each other.
 */
export interface StreamSession {
  /** Credit each side grants a new stream. */
  readonly initialWindow: number;
  /** Credit is returned in batches of this much. */
  readonly windowUpdateThreshold: number;
  cork<T>(fn: () => T): T;
  sendFrame(type: FrameTypeValue, stream: number, payload?: Uint8Array, fin?: boolean): void;
  /** One datagram on stream `id`, or false when it is dropped (congested, too large). */
  sendDatagram(id: number, datagram: Uint8Array): boolean;
  /** Sends as much of the stream's pending bytes as credit and transport allow. */
  flush(s: Stream): void;
  /** The stream is done: the session forgets it. */
  forget(s: Stream): void;
  streamReset(code: string, by: "local" | "peer" | "closed"): void;
}

/**
 * One bidirectional byte stream. Owners set the on* handlers; every byte
 * passed to onData must later be acknowledged with consumed(n).
 */
export class Stream {
  onReply?: (meta: unknown) => void;
  /**
   * Incoming bytes. Until a handler is set they wait in the stream (bounded by
   * the window, since no credit returns for them), so a consumer that attaches
   * after an await misses nothing; setting it delivers them at once.
   */
  get onData(): ((chunk: Uint8Array) => void) | undefined {
    return this.dataHandler;
  }
  set onData(handler: ((chunk: Uint8Array) => void) | undefined) {
    this.dataHandler = handler;
    if (!handler || this.early.length === 0) return;
    for (const chunk of this.early.splice(0)) this.dataHandler?.(chunk);
    this.deliverEnd();
  }
  /** The peer will send no more data; like onData, it waits for a handler and for earlier bytes. */
  get onEnd(): (() => void) | undefined {
    return this.endHandler;
  }
  set onEnd(handler: (() => void) | undefined) {
    this.endHandler = handler;
    this.deliverEnd();
  }
  /** The stream was aborted (by the peer, or because the connection closed); not called if set after that (whenReset is). */
  onReset?: (code: string) => void;
  /** Everything written so far has been sent: write more. */
  onDrain?: () => void;
  /**
   * Incoming datagrams (DATAGRAM frames), each whole as it was sent, outside
   * the bytes and their credit; a view valid only during the call. Nothing
   * is kept for a handler set later: a datagram nobody takes is dropped, as
   * UDP would drop it.
   */
  onDatagram?: (datagram: Uint8Array) => void;
  datagramsSent = 0;
  datagramsReceived = 0;
  /** Datagrams sendDatagram() dropped (congestion, too large, this side ended). */
  datagramsDropped = 0;

  /** @internal */ pending: Uint8Array[] = [];
  /** @internal */ pendingBytes = 0;
  /** @internal */ sendWindow: number;
  bytesSent = 0;
  bytesReceived = 0;
  /** Bytes of OPEN and REPLY metadata (a request's and a response's head) this stream carried. */
  metaBytes = 0;
  private recvWindow: number;
  private unacked = 0;
  private dataHandler?: (chunk: Uint8Array) => void;
  private endHandler?: () => void;
  private early: Uint8Array[] = [];
  private endUndelivered = false;
  private needDrain = false;
  private endQueued = false;
  private localEnded = false;
  private remoteEnded = false;
  private done = false;
  private drainWaiters: ((sent: boolean) => void)[] = [];
  private resetListeners: ((code: string) => void)[] = [];
  private resetWith: string | undefined;

  constructor(
    private readonly mux: StreamSession,
    readonly id: number,
    /** The metadata of the OPEN frame. */
    readonly meta: unknown,
  ) {
    this.sendWindow = mux.initialWindow;
    this.recvWindow = mux.initialWindow;
  }

  get isClosed(): boolean {
    return this.done;
  }

  /** Why the stream was aborted (by either side, or the connection closing); undefined while it was not. */
  get resetCode(): string | undefined {
    return this.resetWith;
  }

  /** The peer's FIN came: every byte it will send has arrived (a reset after that loses none of them). */
  get peerEnded(): boolean {
    return this.remoteEnded;
  }

  /** Runs `fn` with the connection corked (see Mux.cork). */
  cork<T>(fn: () => T): T {
    return this.mux.cork(fn);
  }

  /** Resolves true once everything written has been sent, false if the stream ends first. */
  whenDrained(): Promise<boolean> {
    if (this.done) return Promise.resolve(false);
    if (this.pendingBytes === 0) return Promise.resolve(true);
    return new Promise((resolve) => this.drainWaiters.push(resolve));
  }

  /**
   * Adds a reset listener beside onReset (for helpers that wrap the stream).
   * A stream already reset calls it at once: a consumer that attaches after
   * an await (the REPLY's) must still learn of a reset that came in the same
   * message as the REPLY, when the mux has already forgotten the stream.
   */
  whenReset(listener: (code: string) => void): void {
    if (this.resetWith !== undefined) return listener(this.resetWith);
    this.resetListeners.push(listener);
  }

  /**
   * Gives back bytes onData delivered but the consumer did not take (what
   * followed a head it read): they wait, first, for the next handler, and
   * their credit is still owed by whoever takes them. Only while no handler
   * is set.
   */
  unread(chunk: Uint8Array): void {
    if (chunk.byteLength === 0) return;
    if (this.dataHandler) throw new Error("unread with a data handler set");
    this.early.unshift(chunk);
  }

  /** Accepts the stream with metadata for the opener (e.g. a response head); `end`: no data will follow. */
  reply(meta: unknown, end = false): void {
    if (this.done) return;
    const fin = end && this.pendingBytes === 0 && !this.localEnded;
    this.mux.sendFrame(FrameType.REPLY, this.id, jsonPayload(meta), fin);
    if (fin) this.endedWithFrame();
    else if (end) this.end();
  }

  /**
   * Queues bytes. Returns true when all of them went out at once; false when
   * some wait for credit or for the transport: stop producing until onDrain.
   */
  write(chunk: Uint8Array): boolean {
    if (this.done || this.localEnded || this.endQueued) return false;
    if (chunk.byteLength === 0) return this.pendingBytes === 0;
    this.pending.push(chunk);
    this.pendingBytes += chunk.byteLength;
    this.mux.flush(this);
    if (this.pendingBytes > 0) this.needDrain = true;
    return this.pendingBytes === 0 && !this.done;
  }

  /** Half-closes after the queued bytes are sent; `last`, if given, is written first and carries the FIN. */
  end(last?: Uint8Array): void {
    if (this.done || this.localEnded || this.endQueued) return;
    this.endQueued = true;
    if (last && last.byteLength > 0) {
      this.pending.push(last);
      this.pendingBytes += last.byteLength;
      this.mux.flush(this);
      return;
    }
    if (this.pendingBytes === 0) this.sendFin();
  }

  /** Aborts the stream in both directions. */
  reset(code: string = WireError.CANCELLED): void {
    if (this.done) return;
    this.mux.sendFrame(FrameType.RST, this.id, textPayload(code));
    this.resetWith = code;
    this.finish();
    this.mux.streamReset(code, "local");
    for (const l of this.resetListeners) l(code);
  }

  /**
   * Sends one datagram whole, or drops it and says so (false): over
   * MAX_DATAGRAM, this side already ended, or the connection congested.
   * Never queued, never held for credit.
   */
  sendDatagram(datagram: Uint8Array): boolean {
    if (this.done || this.localEnded || this.endQueued || !this.mux.sendDatagram(this.id, datagram)) {
      this.datagramsDropped++;
      return false;
    }
    this.datagramsSent++;
    return true;
  }

  /** Returns credit for bytes the consumer has taken. */
  consumed(n: number): void {
    if (this.done || this.remoteEnded || n <= 0) return;
    this.unacked += n;
    if (this.unacked >= this.mux.windowUpdateThreshold) {
      this.recvWindow += this.unacked;
      this.mux.sendFrame(FrameType.WINDOW, this.id, u32Payload(this.unacked));
      this.unacked = 0;
    }
  }

  // -- called by the mux --------------------------------------------------------------------

  /** @internal */
  get endIsQueued(): boolean {
    return this.endQueued && !this.localEnded;
  }

  /** @internal A frame carrying FIN went out: this side is done sending. `settle`: close now if the peer is done too (flush leaves that to allSent). */
  endedWithFrame(settle = true): void {
    this.endQueued = true;
    this.localEnded = true;
    if (settle && this.remoteEnded && this.pendingBytes === 0) this.finish();
  }

  /** @internal */
  allSent(): void {
    // drain first: the FIN below may finish the stream, and that must not read as "ended before sent"
    if (this.needDrain) {
      this.needDrain = false;
      const waiters = this.drainWaiters;
      this.drainWaiters = [];
      for (const w of waiters) w(true);
      this.onDrain?.();
    }
    if (this.endQueued && !this.localEnded && !this.done) this.sendFin();
    else if (this.localEnded && this.remoteEnded && !this.done) this.finish();
  }

  /** @internal */
  receivedReply(meta: unknown): void {
    this.onReply?.(meta);
  }

  /** @internal */
  receivedData(chunk: Uint8Array): void {
    if (this.remoteEnded) throw new ProtocolError(`DATA on stream ${this.id} after FIN`);
    this.recvWindow -= chunk.byteLength;
    if (this.recvWindow < 0) throw new ProtocolError(`stream ${this.id} overran its window`);
    this.bytesReceived += chunk.byteLength;
    if (this.dataHandler) this.dataHandler(chunk);
    else this.early.push(chunk);
  }

  /** @internal */
  receivedDatagram(datagram: Uint8Array): void {
    if (this.remoteEnded) throw new ProtocolError(`DATAGRAM on stream ${this.id} after FIN`);
    this.datagramsReceived++;
    this.onDatagram?.(datagram);
  }

  /** @internal */
  receivedWindow(n: number): void {
    this.sendWindow += n;
    if (this.sendWindow > 2 ** 31) throw new ProtocolError(`stream ${this.id} window grew past 2^31`);
    this.mux.flush(this);
  }

  /** @internal */
  receivedFin(): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    this.endUndelivered = true;
    this.deliverEnd();
    if (this.localEnded) this.finish();
  }

  private deliverEnd(): void {
    if (!this.endUndelivered || !this.endHandler || this.early.length > 0) return;
    this.endUndelivered = false;
    this.endHandler();
  }

  /** @internal */
  receivedReset(code: string): void {
    if (this.done) return;
    this.finish();
    this.mux.streamReset(code, "peer");
    this.announceReset(code);
  }

  /** @internal */
  closedByMux(code: string): void {
    if (this.done) return;
    this.done = true;
    this.mux.streamReset(code, "closed");
    this.pending = [];
    this.pendingBytes = 0;
    this.announceReset(code);
  }

  private announceReset(code: string): void {
    this.resetWith = code;
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w(false);
    this.onReset?.(code);
    for (const l of this.resetListeners) l(code);
  }

  private sendFin(): void {
    this.localEnded = true;
    this.mux.sendFrame(FrameType.FIN, this.id);
    if (this.remoteEnded) this.finish();
  }

  private finish(): void {
    this.done = true;
    this.pending = [];
    this.pendingBytes = 0;
    this.mux.forget(this);
    const waiters = this.drainWaiters;
    this.drainWaiters = [];
    for (const w of waiters) w(false);
  }
}

