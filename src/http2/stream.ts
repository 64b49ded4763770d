/**
 * One HTTP/2 stream of a server connection: a request, its body as it
 * comes with credit, and the response side. The connection routes frames
 * to it and sends what it asks; it never touches a socket. Its windows,
 * queue, ends and credit are every stream's (stream-state.ts).
 *
 * Credit: every byte onData delivers is acknowledged with consumed(n) once
 * the consumer has taken it (passed it on, not merely read it), and only
 * then does the stream's window reopen. So a consumer that stops taking
 * stops this stream's client, and no other stream: the connection's own
 * window is reopened as bytes arrive.
 */
import type { H2Request } from "./request-fields.ts";
import { StreamState, type Fields, type StreamSession } from "./stream-state.ts";
import { ErrorCode, errorName } from "./wire.ts";

export interface Peer {
  address: string;
  port: number;
}

export class H2Stream extends StreamState {
  /** The request's trailer fields, when the client sent trailers (before onEnd). */
  onTrailers?: (fields: [string, string][]) => void;
  /** The stream was reset (by the client, by this side, or because the connection closed): the code's name (wire.ts errorName). */
  onReset?: (code: string) => void;
  /** Everything written has been sent (write() had said false). */
  onDrain?: () => void;

  /** Incoming body bytes, a view valid during the call (the connection's input). Until a handler is set they wait (copied, bounded by the window). */
  get onData(): ((chunk: Uint8Array) => void) | undefined {
    return this.dataHandler;
  }
  set onData(handler: ((chunk: Uint8Array) => void) | undefined) {
    this.dataHandler = handler;
    if (!handler || this.early.length === 0) return;
    for (const chunk of this.early.splice(0)) this.dataHandler?.(chunk);
    this.deliverEnd();
  }
  /** The request body is complete; like onData, it waits for a handler and for the bytes before it. */
  get onEnd(): (() => void) | undefined {
    return this.endHandler;
  }
  set onEnd(handler: (() => void) | undefined) {
    this.endHandler = handler;
    this.deliverEnd();
  }

  private finalSent = false;
  private resetWith: string | undefined;
  private dataHandler?: (chunk: Uint8Array) => void;
  private endHandler?: () => void;
  private early: Uint8Array[] = [];
  private endUndelivered = false;

  constructor(
    session: StreamSession,
    id: number,
    readonly request: H2Request,
    /** Who sent it: the connection's client. */
    readonly peer: Peer,
    /** The HEADERS did not end the stream: a body follows (maybe empty). */
    readonly hasBody: boolean,
    recvWindow: number,
    sendWindow: number,
  ) {
    // the request's head is the client's only head: DATA may follow it, and a second block is its trailers
    super(session, id, recvWindow, sendWindow, true);
    this.expectedLength = request.contentLength;
  }

  /** Why it was reset (a code's name); undefined while it was not. */
  get resetCode(): string | undefined {
    return this.resetWith;
  }

  /** The final response head was sent. */
  get responded(): boolean {
    return this.finalSent;
  }

  // -- the response --------------------------------------------------------------------------------

  /**
   * Sends a response head: an informational one (1xx but 101) any number of
   * times, then the final one; `endStream`: no body follows. Names are sent
   * lower-cased; fields that describe an HTTP/1.1 connection must not be
   * among them (http1.ts h2Response leaves them out).
   */
  respond(status: number, fields: Fields, endStream = false): void {
    if (this.done || this.finalSent || this.localEnded) return;
    if (status === 101 || status < 100 || status > 999) return this.reset(ErrorCode.INTERNAL_ERROR);
    const final = status >= 200;
    if (final) {
      this.finalSent = true;
      if (endStream) this.endQueued = true;
    }
    this.heads.push({ status, fields, end: final && endStream });
    this.session.flush(this);
  }

  /**
   * Queues body bytes (the stream keeps them until sent: the caller must
   * not reuse them). True when all of them went out at once; false when
   * some wait for a window or the socket: write no more until onDrain.
   */
  write(chunk: Uint8Array): boolean {
    if (this.done || this.endQueued) return false;
    if (!this.finalSent) {
      this.reset(ErrorCode.INTERNAL_ERROR); // a body before its head: the caller's mistake, not the client's
      return false;
    }
    if (chunk.byteLength === 0) return this.pendingBytes === 0;
    return this.queueBody(chunk);
  }

  /** Ends the response after the queued bytes, with `trailers` when given. */
  end(trailers?: Fields): void {
    if (this.done || this.endQueued || this.localEnded) return;
    if (!this.finalSent) return this.reset(ErrorCode.INTERNAL_ERROR);
    this.endQueued = true;
    this.trailers = trailers && trailers.length > 0 ? trailers : undefined;
    this.session.flush(this);
  }

  /** Aborts the stream both ways with `code` (CANCEL by default). */
  reset(code: number = ErrorCode.CANCEL): void {
    if (this.done) return;
    this.session.sendReset(this, code);
    this.finish(errorName(code), false);
  }

  /** @internal The connection aborts it (a stream error, a stall, a limit): as reset(), and onReset is told. */
  abort(code: number): void {
    if (this.done) return;
    this.session.sendReset(this, code);
    this.finish(errorName(code), true);
  }

  // -- called by the connection ---------------------------------------------------------------------

  /** @internal Body bytes (their window already counted by the connection). */
  receivedData(chunk: Uint8Array): void {
    this.bytesReceived += chunk.byteLength;
    if (this.dataHandler) this.dataHandler(chunk);
    // the chunk is a view of the connection's input, which is not ours to keep
    else this.early.push(chunk.slice());
  }

  /** @internal */
  receivedTrailers(fields: [string, string][]): void {
    this.onTrailers?.(fields);
  }

  /** @internal The client's END_STREAM. */
  receivedEnd(): void {
    if (this.remoteEnded) return;
    this.remoteEnded = true;
    this.endUndelivered = true;
    this.deliverEnd();
    if (this.localEnded) this.finish(undefined, false);
  }

  /** @internal The client reset it, or the connection closed under it. */
  receivedReset(code: number): void {
    if (this.done) return;
    this.finish(errorName(code), true);
  }

  /** @internal This side's END_STREAM went out (on DATA, trailers or the final head). */
  sentEnd(): void {
    this.localEnded = true;
    if (this.remoteEnded) return this.finish(undefined, false);
    // answered whole while the request's body still comes, and nobody reads it: the client is asked
    // to stop sending (RST_STREAM NO_ERROR, RFC 9113 §8.1) rather than have its bytes kept
    if (!this.dataHandler) {
      this.session.sendReset(this, ErrorCode.NO_ERROR);
      this.finish(undefined, false);
    }
  }

  protected drained(): void {
    this.onDrain?.();
  }

  private deliverEnd(): void {
    if (!this.endUndelivered || !this.endHandler || this.early.length > 0) return;
    this.endUndelivered = false;
    this.endHandler();
  }

  /** Closed: the connection forgets it; `reason` when it was reset, told to onReset when `tell`. */
  private finish(reason: string | undefined, tell: boolean): void {
    this.close();
    if (reason === undefined) return;
    this.early = [];
    this.resetWith = reason;
    if (tell) this.onReset?.(reason);
  }
}
