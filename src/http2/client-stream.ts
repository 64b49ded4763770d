/**
 * One stream of an HTTP/2 client connection (client-connection.ts): a
 * request, its head sent when the stream opens and its body as the
 * server's windows allow, and its response told to a handler as it comes:
 * heads, body bytes with credit, the end with its trailers, or why there is
 * no whole response. It never touches a socket. Its windows, queue, ends
 * and credit are every stream's (stream-state.ts).
 *
 * Credit: body bytes the handler is given are acknowledged with
 * consumed(n) once it has taken them (passed them on, not merely read
 * them); only then does the stream's window reopen. So a consumer that
 * stops taking stops this stream's server, and no other stream.
 */
import { StreamState, type Fields, type StreamSession } from "./stream-state.ts";
import { ErrorCode, errorName } from "./wire.ts";

export type { Fields } from "./stream-state.ts";

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

export class H2ClientStream extends StreamState {
  constructor(
    session: StreamSession,
    id: number,
    private readonly handler: H2ResponseHandler,
    recvWindow: number,
    sendWindow: number,
  ) {
    super(session, id, recvWindow, sendWindow, false);
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
    return this.queueBody(chunk);
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

  // -- called by the connection -----------------------------------------------------------------------

  /** @internal The request's head, sent as the stream opens; `endStream`: no body follows. */
  sendHead(fields: Fields, endStream: boolean): void {
    if (endStream) this.endQueued = true;
    this.heads.push({ status: undefined, fields, end: endStream });
    this.session.flush(this);
  }

  /** @internal A response head, checked (response-fields.ts). */
  receivedHead(status: number, fields: [string, string][], endStream: boolean): void {
    if (status < 200) {
      if (endStream) return this.fail(ErrorCode.PROTOCOL_ERROR, "an informational response that ends the stream");
      return this.handler.head(status, fields, false);
    }
    this.finalHeadReceived = true;
    this.handler.head(status, fields, endStream);
    if (endStream) this.receivedEnd();
  }

  /** @internal Response body bytes (their window already counted by the connection). */
  receivedData(chunk: Uint8Array): void {
    this.bytesReceived += chunk.byteLength;
    if (!this.done) this.handler.data(chunk);
  }

  /** @internal The server's END_STREAM on DATA, or its trailer section (which ends the stream). */
  receivedEnd(trailers?: [string, string][]): void {
    if (this.remoteEnded || this.done) return;
    this.remoteEnded = true;
    // the request side may still be open (a response sent whole before the body ended): the handler decides
    if (this.localEnded) this.finish();
    this.handler.end(trailers);
  }

  /** @internal The server reset it. */
  receivedReset(code: number): void {
    if (this.done) return;
    this.finish();
    const name = errorName(code);
    this.handler.reset({ code: name, why: `the service reset the stream (${name})`, unprocessed: code === ErrorCode.REFUSED_STREAM });
  }

  /** @internal The server broke the rules on this stream (`act`, what it did): reset with `code`, the handler told why. */
  abort(code: number, act = "broke HTTP/2 on the stream"): void {
    this.fail(code, `the service ${act}`);
  }

  /** @internal The stream ends without a response because of what the server sent or did: reset with `code` when it is still open on the wire. */
  fail(code: number | undefined, why: string, unprocessed = false): void {
    if (this.done) return;
    if (code !== undefined) this.session.sendReset(this, code);
    this.finish();
    this.handler.reset({ code: code === undefined ? "CANCEL" : errorName(code), why, unprocessed });
  }

  /** @internal This side's END_STREAM went out. */
  sentEnd(): void {
    this.localEnded = true;
    if (this.remoteEnded) this.finish();
  }

  protected drained(): void {
    this.handler.drained();
  }

  private finish(): void {
    if (!this.done) this.close();
  }
}
