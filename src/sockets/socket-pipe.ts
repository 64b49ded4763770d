/**
 * Two Bun sockets joined both ways, as a TCP proxy joins them: what one
 * reads, the other writes, in order. Bun's write() does not buffer: what a
 * socket does not take waits here, and the side that sent it is paused
 * until it drains, so at most about one read per direction is held. A FIN
 * is passed on as a FIN once what came before it is written, so either
 * side may half-close; an error on one side cuts the other. A half-closed
 * pipe whose open direction carries nothing for HALF_OPEN_IDLE_MS is cut
 * (HAProxy's "timeout client-fin"): a peer must not hold two descriptors
 * for ever by never sending its own FIN.
 *
 * Both sockets must be made with allowHalfOpen, or Bun closes a socket as
 * soon as its peer half-closes, and the other direction is lost.
 */
import type { Socket } from "bun";
import { PendingWrites } from "./pending-writes.ts";

/** More than this waiting for one side means its writer did not pause: both are cut rather than grown. */
const QUEUE_LIMIT = 4 * 1024 * 1024;
/** How long a half-closed pipe may go without a byte before both sides are cut. */
export const HALF_OPEN_IDLE_MS = 30_000;

export type PipeSide = "a" | "b";

/** One direction: bytes read from `from`, written to `to`. */
class Flow {
  readonly pending: PendingWrites;
  /** `from` sent its FIN (or closed). */
  private ended = false;
  /** The FIN was passed on: `to`'s write side is shut. */
  private shut = false;

  constructor(
    private readonly from: Socket<any>,
    private readonly to: Socket<any>,
    /** Called when the FIN has been passed on. */
    private readonly onShut: () => void,
  ) {
    this.pending = new PendingWrites(to);
  }

  /** False when too much waits: the pipe cuts both. */
  write(chunk: Uint8Array): boolean {
    // a copy of what `to` does not take now: the chunk is Bun's, and the next read is another
    if (this.pending.write(chunk, true) || this.pending.closed) return true;
    if (this.pending.queued > QUEUE_LIMIT) return false;
    this.from.pause();
    return true;
  }

  /** `to` can take more. */
  drained(): void {
    if (!this.pending.flush()) return;
    this.from.resume();
    this.passEnd();
  }

  /** No more bytes will come from `from`. */
  end(): void {
    this.ended = true;
    this.passEnd();
  }

  private passEnd(): void {
    if (!this.ended || this.shut || !this.pending.empty) return;
    this.shut = true;
    this.to.shutdown();
    this.onShut();
  }
}

export class SocketPipe {
  private readonly ab: Flow;
  private readonly ba: Flow;
  private cut = false;
  /** Set once a FIN has been passed on: the pipe is half-closed, and its idleness is watched. */
  private idleTimer: ReturnType<typeof setTimeout> | undefined;
  private lastByteAt = 0;
  private closedSides = 0;

  constructor(
    private readonly a: Socket<any>,
    private readonly b: Socket<any>,
    private readonly halfOpenIdleMs = HALF_OPEN_IDLE_MS,
  ) {
    this.ab = new Flow(a, b, () => this.halfClosed());
    this.ba = new Flow(b, a, () => this.halfClosed());
  }

  /**
   * Starts the flow with what `a` sent before `b` was there (a was paused
   * meanwhile), and whether `a` had half-closed already.
   */
  start(first: Uint8Array, aEnded: boolean): void {
    if (first.length > 0) this.data("a", first);
    if (this.ab.pending.empty) this.a.resume();
    if (aEnded) this.ab.end();
  }

  /** Bytes read from `side`. */
  data(side: PipeSide, chunk: Uint8Array): void {
    if (this.cut) return;
    if (this.idleTimer) this.lastByteAt = performance.now();
    if (!this.flowFrom(side).write(chunk)) this.terminate();
  }

  /** `side` can take more. */
  drain(side: PipeSide): void {
    this.flowFrom(other(side)).drained();
  }

  /** `side` half-closed: it sends no more. */
  end(side: PipeSide): void {
    this.flowFrom(side).end();
  }

  /**
   * `side` closed. After an error the other side is cut. A close without
   * one ends what came from it (after our shutdown, Bun reports the peer's
   * FIN as a close without an end event); the other direction has nowhere
   * to go, and what the other side still sends is dropped until it closes
   * (or stays idle past the half-open limit).
   */
  closed(side: PipeSide, error?: unknown): void {
    if (error !== undefined) return this.terminate();
    if (++this.closedSides === 2) clearTimeout(this.idleTimer);
    this.flowFrom(side).end();
  }

  /** Cuts both sides at once. */
  terminate(): void {
    if (this.cut) return;
    this.cut = true;
    clearTimeout(this.idleTimer);
    this.ab.pending.clear();
    this.ba.pending.clear();
    this.a.terminate();
    this.b.terminate();
  }

  private halfClosed(): void {
    if (this.idleTimer || this.cut || this.closedSides === 2) return;
    this.lastByteAt = performance.now();
    const check = () => {
      const idle = performance.now() - this.lastByteAt;
      if (idle >= this.halfOpenIdleMs) return this.terminate();
      this.idleTimer = setTimeout(check, this.halfOpenIdleMs - idle);
      this.idleTimer.unref();
    };
    this.idleTimer = setTimeout(check, this.halfOpenIdleMs);
    this.idleTimer.unref();
  }

  private flowFrom(side: PipeSide): Flow {
    return side === "a" ? this.ab : this.ba;
  }
}

function other(side: PipeSide): PipeSide {
  return side === "a" ? "b" : "a";
}
