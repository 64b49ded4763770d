/**
 * One stream of an HTTP/2 client connection (client-connection.ts): a
 * request, its head sent when the stream opens and its body as the
 * server's windows allow (client-sender.ts), and its response told to a
 * handler as it comes: heads, body bytes with credit, the end with its
 * trailers, or why there is no whole response. It never touches a socket.
 *
 * Credit: body bytes the handler is given are acknowledged with
 * consumed(n) once it has taken them (passed them on, not merely read
 * them); only then does the stream's window reopen (WINDOW_UPDATE, in
 * batches of half a window). So a consumer that stops taking stops this
 * stream's server, and no other stream.
 */
import { ErrorCode, errorName } from "./wire.ts";

export type Fields = readonly (readonly [string, string])[];

/** Why a stream ended without a whole response. */
export interface H2Reset {
  /** The code's name (wire.ts errorName): REFUSED_STREAM, CANCEL, PROTOCOL_ERROR... */
  code: string;
  /** In words, for a 502 page and a log line. */
  why: string;
  /** The server never processed the request (REFUSED_STREAM, or a stream past a GOAWAY's last): it may be sent again. */
  unprocessed: boolean;
}

/** Who hears a stream's response. Views passed are valid during the call only. */
export interface H2ResponseHandler {
  /** A response head: informational ones (1xx), then the final one; `endStream`: the final one is the whole response. */
  head(status: number, fields: [string, string][], endStream: boolean): void;
  /** Response body bytes: give their credit back with consumed(n) once they are taken. */
  data(chunk: Uint8Array): void;
  /** The response is whole; `trailers` when a trailer section ended it. */
  end(trailers: [string, string][] | undefined): void;
  /** The stream ended without a whole response (not called after reset(), which the caller knows of). */
  reset(reset: H2Reset): void;
  /** Request body bytes that waited (write() said false) have all gone out. */
  drained(): void;
}

/** What a stream needs of its connection. */
export interface ClientStreamSession {
  /** Sends what `s` has queued (body bytes as the windows allow, then its end) while the socket takes it. */
  flush(s: H2ClientStream): void;
  sendReset(s: H2ClientStream, code: number): void;
  sendWindowUpdate(s: H2ClientStream, increment: number): void;
  /** The stream is closed: the connection forgets it. */
  forget(s: H2ClientStream): void;
  /** Credit is returned in batches of this much. */
  readonly windowUpdateThreshold: number;
}

export class H2ClientStream {
  /** @internal What the server may still send before a WINDOW_UPDATE; what this side may send. */
  recvWindow: number;
  /** @internal */ sendWindow: number;
  /** @internal Request body bytes waiting for a window or the socket. */
  pending: Uint8Array[] = [];
  /** @internal */ pendingBytes = 0;
  /** @internal end() was called. */
  endQueued = false;
  /** This side's END_STREAM went out; the server's came. */
  localEnded = false;
  remoteEnded = false;
  /** The final response head came: another header block is the trailer section. */
  finalSeen = false;
  private done = false;
  private unacked = 0;
  private needDrain = false;

  constructor(
    private readonly session: ClientStreamSession,
    readonly id: number,
    private readonly handler: H2ResponseHandler,
    recvWindow: number,
    sendWindow: number,
  ) {
    this.recvWindow = recvWindow;
    this.sendWindow = sendWindow;
  }

  /** Closed: both sides ended, or it was reset. */
  get isClosed(): boolean {
    return this.done;
  }

  // -- what the request's side does -----------------------------------------------------------------

  /**
   * Queues request body bytes (kept until sent: the caller must not reuse
   * them). True when all of them went out at once; false when some wait for
   * a window or the socket: the handler hears drained() when they went.
   */
  write(chunk: Uint8Array): boolean {
    if (this.done || this.endQueued) return false;
    if (chunk.byteLength === 0) return this.pendingBytes === 0;
    this.pending.push(chunk);
    this.pendingBytes += chunk.byteLength;
    this.session.flush(this);
    if (this.pendingBytes > 0) this.needDrain = true;
    return this.pendingBytes === 0 && !this.done;
  }

  /** Ends the request after the queued bytes (END_STREAM). */
  end(): void {
    if (this.done || this.endQueued || this.localEnded) return;
    this.endQueued = true;
    this.session.flush(this);
  }

  /** Gives up the stream both ways (RST_STREAM `code`); the handler hears nothing more. */
  reset(code: number = ErrorCode.CANCEL): void {
    if (this.done) return;
    this.session.sendReset(this, code);
    this.finish();
  }

  /** Returns credit for response bytes the handler has taken. */
  consumed(n: number): void {
    if (this.done || this.remoteEnded || n <= 0) return;
    this.unacked += n;
    if (this.unacked < this.session.windowUpdateThreshold) return;
    this.recvWindow += this.unacked;
    this.session.sendWindowUpdate(this, this.unacked);
    this.unacked = 0;
  }

  // -- called by the connection -----------------------------------------------------------------------

  /** @internal A response head, checked (response-fields.ts). */
  receivedHead(status: number, fields: [string, string][], endStream: boolean): void {
    if (status < 200) {
      if (endStream) return this.fail(ErrorCode.PROTOCOL_ERROR, "an informational response that ends the stream");
      return this.handler.head(status, fields, false);
    }
    this.finalSeen = true;
    this.handler.head(status, fields, endStream);
    if (endStream) this.receivedEnd();
  }

  /** @internal Response body bytes (their window already counted by the connection). */
  receivedData(chunk: Uint8Array): void {
    if (!this.done) this.handler.data(chunk);
  }

  /** @internal Bytes counted by the window that no handler sees (padding): their credit returns at once. */
  creditNow(n: number): void {
    if (n > 0) this.consumed(n);
  }

  /** @internal The server's END_STREAM on DATA, or its trailer section (which ends the stream). */
  receivedEnd(trailers?: [string, string][]): void {
    if (this.remoteEnded || this.done) return;
    this.remoteEnded = true;
    this.ended(trailers);
  }

  /** @internal The server reset it. */
  receivedReset(code: number): void {
    if (this.done) return;
    this.finish();
    const name = errorName(code);
    this.handler.reset({ code: name, why: `the service reset the stream (${name})`, unprocessed: code === ErrorCode.REFUSED_STREAM });
  }

  /** @internal The stream ends without a response because of what the server sent or did: reset with `code` when it is still open on the wire. */
  fail(code: number | undefined, why: string, unprocessed = false): void {
    if (this.done) return;
    if (code !== undefined) this.session.sendReset(this, code);
    this.finish();
    this.handler.reset({ code: code === undefined ? "CANCEL" : errorName(code), why, unprocessed });
  }

  /** @internal Everything queued went out: the handler hears drained() if it waited. */
  allSent(): void {
    if (!this.needDrain) return;
    this.needDrain = false;
    this.handler.drained();
  }

  /** @internal This side's END_STREAM went out. */
  sentEnd(): void {
    this.localEnded = true;
    if (this.remoteEnded) this.finish();
  }

  private ended(trailers: [string, string][] | undefined): void {
    // the request side may still be open (a response sent whole before the body ended): the handler decides
    if (this.localEnded) this.finish();
    this.handler.end(trailers);
  }

  private finish(): void {
    if (this.done) return;
    this.done = true;
    this.pending = [];
    this.pendingBytes = 0;
    this.session.forget(this);
  }
}
