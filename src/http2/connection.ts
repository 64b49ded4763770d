/**
 * One HTTP/2 connection of a client, on the server's side (RFC 9113): the
 * shared end of a connection (endpoint.ts) in the server's role, with
 * what is the server's alone: streams handed to the handler as requests
 * (request-blocks.ts), the defences every HTTP/2 server facing the internet
 * needs, with the limits of limits.ts (docs/http2.md names each attack and
 * its defence), the time limits, and the graceful end.
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
import { Http2Endpoint } from "./endpoint.ts";
import { H2_MAX_QUEUED_CONTROL_BYTES, H2_STREAM_WINDOW, type Http2Limits } from "./limits.ts";
import type { Http2Io } from "./output.ts";
import { readRequestBlock, type RequestBlockOwner } from "./request-blocks.ts";
import { SERVER } from "./role.ts";
import type { StreamState } from "./stream-state.ts";
import type { H2Stream, Peer } from "./stream.ts";
import { unwatch } from "./sweep.ts";
import { ConnectionError, ErrorCode, MAX_WINDOW, Setting } from "./wire.ts";

/** Who serves the connection's requests. */
export interface Http2Handler {
  /** A request on a new stream: set its handlers now or after an await (its body waits, bounded by its window). */
  request(stream: H2Stream): void;
  /** The connection is gone (its streams were reset first). */
  closed?(): void;
}

/** The connection's window: at least this, or every stream's window together, so that it never holds a stream back. */
const CONNECTION_WINDOW_MIN = 1024 * 1024;

export class Http2ServerConnection extends Http2Endpoint<H2Stream> implements RequestBlockOwner {
  /** Requests handed to the handler. */
  served = 0;
  readonly peer: Peer;
  private goawaySent = false;
  /** The client sent GOAWAY or half-closed: it opens no more streams. */
  private peerDone = false;
  private gone = false;

  constructor(
    io: Http2Io & { peer?: Peer },
    readonly limits: Http2Limits,
    private readonly handler: Http2Handler,
  ) {
    super(io, SERVER, {
      settings: [
        Setting.MAX_CONCURRENT_STREAMS, limits.maxConcurrentStreams,
        Setting.INITIAL_WINDOW_SIZE, H2_STREAM_WINDOW,
        Setting.MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes,
        Setting.NO_RFC7540_PRIORITIES, 1,
      ], // prettier-ignore
      maxHeaderListBytes: limits.maxHeaderListBytes,
      streamWindow: H2_STREAM_WINDOW,
      connectionWindow: Math.min(MAX_WINDOW, Math.max(CONNECTION_WINDOW_MIN, limits.maxConcurrentStreams * H2_STREAM_WINDOW)),
      maxQueuedControlBytes: H2_MAX_QUEUED_CONTROL_BYTES,
      maxQueuedBytes: limits.maxQueuedResponseBytes,
      maxControlFramesPerSecond: limits.maxControlFramesPerSecond,
      maxResetsPerSecond: limits.maxResetsPerSecond,
    });
    this.peer = io.peer ?? { address: "", port: 0 };
  }

  get acceptsStreams(): boolean {
    return !this.goawaySent && !this.peerDone;
  }

  // -- socket events (received, drained: the endpoint's) -------------------------------------------

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
    this.out.goaway(this.highest, ErrorCode.NO_ERROR, "");
    this.closeIfDone();
  }

  /** Ends the connection now with `code` (GOAWAY, then close once it is written); streams in flight are reset. */
  close(code: number = ErrorCode.NO_ERROR, why = ""): void {
    if (this.closing) return;
    this.closing = true;
    this.out.goaway(this.highest, code, why);
    this.resetAll(code === ErrorCode.NO_ERROR ? ErrorCode.CANCEL : code);
    this.out.close();
  }

  // -- the server's part of the endpoint ------------------------------------------------------------------

  /** @internal The sweep: every time limit checked against `now`. */
  protected checkClocks(now: number): void {
    const idle = this.limits.idleTimeoutMs;
    if (!this.ready) {
      if (now - this.openedAt >= idle) this.cut(); // no preface and SETTINGS in time
      return;
    }
    if (this.ackDueSince > 0 && now - this.ackDueSince >= idle) return this.close(ErrorCode.SETTINGS_TIMEOUT, "SETTINGS not acknowledged");
    if (this.blocks.stream !== 0 && now - this.blocks.since >= idle) return this.close(ErrorCode.ENHANCE_YOUR_CALM, "a header block not finished in time");
    if (this.streams.size === 0 && now - this.idleSince >= idle) return this.close(ErrorCode.NO_ERROR, "idle");
    // a window the client keeps shut: the response's bytes would wait (and hold memory) for ever
    this.sender.expireStalled(now - idle);
  }

  protected headerBlock(id: number, endStream: boolean, block: Uint8Array, selfDependent: boolean): void {
    readRequestBlock(this, id, endStream, block, selfDependent);
  }

  protected receivedGoaway(): void {
    this.peerDone = true;
    this.closeIfDone();
  }

  protected settingsApplied(): void {}

  /** @internal A new stream for the handler (request-blocks.ts). */
  request(s: H2Stream): void {
    this.served++;
    this.handler.request(s);
  }

  forget(s: StreamState): void {
    this.streams.delete(s.id);
    if (this.streams.size > 0) return;
    this.idleSince = performance.now();
    this.closeIfDone();
  }

  // -- the end ------------------------------------------------------------------------------------------

  protected failed(err: unknown): void {
    if (err instanceof ConnectionError) return this.close(err.code, err.message);
    log.error("an HTTP/2 connection's handling failed: closing it", { err: String((err as Error)?.message ?? err).slice(0, 200) });
    this.close(ErrorCode.INTERNAL_ERROR, "");
  }

  /** A client that does not read what it asks for is cut without a word. */
  protected overflowed(): void {
    this.cut();
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
