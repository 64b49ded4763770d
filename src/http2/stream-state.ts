/**
 * What every HTTP/2 stream has, on either side of a connection: its two
 * windows, what it queued to send (heads, body bytes, its end and
 * trailers) until the windows and the socket take it, its two ends, and the
 * credit it gives back as its consumer takes what it received. The server's
 * stream (stream.ts: a request, and the response to it) and the client's
 * (client-stream.ts: a request sent, the response heard) are this with what
 * their users see; sender.ts sends what a stream queued, incoming.ts hands
 * it what came.
 *
 * Credit: every body byte a stream hands on is acknowledged with
 * consumed(n) once its consumer has taken it (passed it on, not merely read
 * it), and only then does the stream's window reopen (WINDOW_UPDATE, in
 * batches of half a window). So a consumer that stops taking stops this
 * stream's peer, and no other stream.
 *
 * States (RFC 9113 §5.1): open until either side's END_STREAM
 * (half-closed), closed when both have ended or either reset it.
 */

import { ErrorCode } from "./wire.ts";

export type Fields = readonly (readonly [string, string])[];

/** A header block waiting to be sent: a response head (a status), a request head (none), with END_STREAM or not. */
export interface QueuedHead {
  status: number | undefined;
  fields: Fields;
  end: boolean;
}

/** What a stream needs of its connection (the connection's sender). */
export interface StreamSession {
  /** Sends what `s` has queued (heads, then body bytes as the windows allow, then its end) while the socket takes it. */
  flush(s: StreamState): void;
  /** Bytes were queued on `s` (or left its queue, negative); false when the connection holds more than it may. */
  queued(s: StreamState, delta: number): boolean;
  sendReset(s: StreamState, code: number): void;
  sendWindowUpdate(s: StreamState, increment: number): void;
  /** The stream is closed: the connection forgets it. */
  forget(s: StreamState): void;
  /** Credit is returned in batches of this much. */
  readonly windowUpdateThreshold: number;
}

export abstract class StreamState {
  /** Body bytes received; body bytes sent. */
  bytesReceived = 0;
  bytesSent = 0;
  /** @internal What the peer may still send before a WINDOW_UPDATE; what this side may send. */
  recvWindow: number;
  /** @internal */ sendWindow: number;
  /** @internal Heads waiting for the socket, sent before any body byte. */
  heads: QueuedHead[] = [];
  /** @internal Body bytes waiting for a window or the socket. */
  pending: Uint8Array[] = [];
  /** @internal */ pendingBytes = 0;
  /** @internal Since when body bytes wait on a window the peer keeps shut (0: they do not). */
  stalledSince = 0;
  /** @internal end() was called; trailers to send with it. */
  endQueued = false;
  /** @internal */ trailers: Fields | undefined;
  /** @internal DATA went out since the peer's last WINDOW_UPDATE for the stream (one that follows none is unprompted). */
  sentSinceUpdate = false;
  /** This side's END_STREAM went out; the peer's came. */
  localEnded = false;
  remoteEnded = false;
  /** @internal The peer's body's content-length, held to as DATA comes (-1: none to hold to). */
  expectedLength = -1;
  /** The peer's final head came: DATA may follow, and another header block is its trailer section. */
  finalHeadReceived: boolean;
  protected done = false;
  private unacked = 0;
  private needDrain = false;

  constructor(
    protected readonly session: StreamSession,
    readonly id: number,
    recvWindow: number,
    sendWindow: number,
    finalHeadReceived: boolean,
  ) {
    this.recvWindow = recvWindow;
    this.sendWindow = sendWindow;
    this.finalHeadReceived = finalHeadReceived;
  }

  /** Closed: both sides ended, or it was reset. */
  get isClosed(): boolean {
    return this.done;
  }

  /** Returns credit for body bytes the consumer has taken. */
  consumed(n: number): void {
    if (this.done || this.remoteEnded || n <= 0) return;
    this.unacked += n;
    if (this.unacked < this.session.windowUpdateThreshold) return;
    this.recvWindow += this.unacked;
    this.session.sendWindowUpdate(this, this.unacked);
    this.unacked = 0;
  }

  // -- called by the connection ---------------------------------------------------------------------

  /** @internal Bytes counted by the window that no consumer sees (padding): their credit returns at once. */
  creditNow(n: number): void {
    if (n > 0) this.consumed(n);
  }

  /** @internal Everything queued went out (the sender's flush): the writer hears it if it waited. */
  allSent(): void {
    if (!this.needDrain) return;
    this.needDrain = false;
    this.drained();
  }

  /** @internal Body bytes (their window already counted by the connection). */
  abstract receivedData(chunk: Uint8Array): void;
  /** @internal The peer's END_STREAM, on DATA or with its trailer section. */
  abstract receivedEnd(trailers?: [string, string][]): void;
  /** @internal The peer reset it (or the connection closed under it). */
  abstract receivedReset(code: number): void;
  /** @internal The connection ends it with `code` for what the peer did (`act`, from its side: "sent DATA after the stream's end"). */
  abstract abort(code: number, act?: string): void;
  /** @internal This side's END_STREAM went out (on DATA, trailers or a head). */
  abstract sentEnd(): void;

  /** Body bytes that waited have all gone out. */
  protected abstract drained(): void;

  /**
   * Queues body bytes (kept until sent: the caller must not reuse them).
   * True when all of them went out at once; false when some wait for a
   * window or the socket (drained() follows), or the connection holds more
   * than it may (the stream is then aborted).
   */
  protected queueBody(chunk: Uint8Array): boolean {
    this.pending.push(chunk);
    this.pendingBytes += chunk.byteLength;
    // a producer that writes on past false would grow the connection's memory without bound
    if (!this.session.queued(this, chunk.byteLength)) {
      this.abort(ErrorCode.INTERNAL_ERROR);
      return false;
    }
    this.session.flush(this);
    if (this.pendingBytes > 0) this.needDrain = true;
    return this.pendingBytes === 0 && !this.done;
  }

  /** Closed: nothing more is sent, what waited is dropped, and the connection forgets it. */
  protected close(): void {
    this.done = true;
    if (this.pendingBytes > 0) this.session.queued(this, -this.pendingBytes);
    this.heads = [];
    this.pending = [];
    this.pendingBytes = 0;
    this.session.forget(this);
  }
}
