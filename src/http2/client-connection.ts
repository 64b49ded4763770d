/**
 * One HTTP/2 connection to a server, on the client's side (RFC 9113), with
 * prior knowledge (h2c) or after TLS's ALPN said h2: the shared end of a
 * connection (endpoint.ts) in the client's role, with what is the client's
 * alone: requests opened as streams (client-stream.ts), their responses
 * read and checked (response-blocks.ts) and handed to each stream's handler
 * as they come, GOAWAY's unprocessed streams told as such, and its owner
 * told when more streams may open and when the connection is over.
 *
 * Like the server connection it never touches a socket: it is given an
 * Http2Io and the socket's events (received, drained, closed). Its owner
 * opens streams while `available` says it may (the server's
 * SETTINGS_MAX_CONCURRENT_STREAMS and ours, a socket that takes bytes, no
 * GOAWAY), and hears when more may be opened and when the connection is
 * over. Time limits are checked by the engine's one sweep a second.
 *
 * Errors: what the server sends wrong is a ConnectionError (GOAWAY with its
 * code, every stream told why) or, for one stream, that stream reset with
 * its reason. Whatever the server sends, nothing throws out of received().
 */
import type { Http2ClientLimits } from "./client-limits.ts";
import { H2ClientStream, type Fields, type H2ResponseHandler } from "./client-stream.ts";
import { Http2Endpoint } from "./endpoint.ts";
import type { Http2Io } from "./output.ts";
import { readResponseBlock } from "./response-blocks.ts";
import { CLIENT } from "./role.ts";
import type { StreamState } from "./stream-state.ts";
import { unwatch } from "./sweep.ts";
import { ConnectionError, DEFAULT_WINDOW, ErrorCode, errorName, MAX_STREAM_ID, MAX_WINDOW, Setting } from "./wire.ts";

/** Who uses the connection. */
export interface Http2ClientOwner {
  /** More streams may be opened now (the server's SETTINGS came, a stream closed, the socket drained, a GOAWAY came: look at `available` and `acceptsStreams`). */
  slots(): void;
  /** The connection is over (its streams were told first); `why` in words; `ready`: the server's SETTINGS had come. */
  closed(why: string, ready: boolean): void;
  /** Streams are open (true) or none is (false): an idle connection should not keep a process alive. */
  busy?(yes: boolean): void;
}

/** What an HTTP/1.1 server answers a preface with starts so. */
const H = 0x48;

export class Http2ClientConnection extends Http2Endpoint<H2ClientStream> {
  private peerMaxStreams = Number.POSITIVE_INFINITY;
  private goneAway = false;
  private gone = false;
  private firstByte = -1;
  private slotsDue = false;
  private readonly tellSlots = () => {
    this.slotsDue = false;
    if (!this.closing) this.owner.slots();
  };

  constructor(
    io: Http2Io,
    private readonly limits: Http2ClientLimits,
    private readonly owner: Http2ClientOwner,
  ) {
    // the server's SETTINGS may come in any order with ours; a client has no flood budgets: its server is the user's own
    super(io, CLIENT, {
      settings: [
        Setting.ENABLE_PUSH, 0,
        Setting.INITIAL_WINDOW_SIZE, limits.streamWindow,
        Setting.MAX_HEADER_LIST_SIZE, limits.maxHeaderListBytes,
      ], // prettier-ignore
      maxHeaderListBytes: limits.maxHeaderListBytes,
      streamWindow: limits.streamWindow,
      connectionWindow: Math.min(MAX_WINDOW, Math.max(DEFAULT_WINDOW, limits.maxStreams * limits.streamWindow)),
      maxQueuedControlBytes: limits.maxQueuedControlBytes,
      // a stream's writer queues only within the credit it has (a tunnel stream's)
      maxQueuedBytes: Number.POSITIVE_INFINITY,
      maxControlFramesPerSecond: Number.POSITIVE_INFINITY,
      maxResetsPerSecond: Number.POSITIVE_INFINITY,
    });
  }

  /** New streams may be opened on it (now or once it drains): ready, no GOAWAY, not closing, ids left. */
  get acceptsStreams(): boolean {
    return this.ready && !this.goneAway && !this.closing && this.highest + 2 <= MAX_STREAM_ID;
  }

  /** How many streams may be opened now. */
  get available(): number {
    if (!this.acceptsStreams || this.out.blocked) return 0;
    return Math.max(0, Math.min(this.peerMaxStreams, this.limits.maxStreams) - this.streams.size);
  }

  /**
   * Opens a stream with the request head `fields` (pseudo-header fields
   * first), ending it at once when `endStream` (no body). Only while
   * `available` is above 0.
   */
  open(fields: Fields, endStream: boolean, handler: H2ResponseHandler): H2ClientStream {
    if (this.available <= 0) throw new Error("no stream may be opened on this connection now");
    // odd ids, each above the last (RFC 9113 §5.1.1)
    const id = (this.highest = this.highest === 0 ? 1 : this.highest + 2);
    const s = new H2ClientStream(this.sender, id, handler, this.limits.streamWindow, this.sender.initialWindow);
    this.streams.set(id, s);
    if (this.streams.size === 1) this.owner.busy?.(true);
    this.out.cork();
    try {
      s.sendHead(fields, endStream);
    } finally {
      this.out.uncork();
    }
    return s;
  }

  // -- socket events -------------------------------------------------------------------------------

  /** Bytes from the server. */
  override received(bytes: Uint8Array): void {
    if (this.firstByte < 0 && bytes.byteLength > 0) this.firstByte = bytes[0]!;
    super.received(bytes);
  }

  /** The socket wrote everything it held: streams waiting for it send on, and more may open. */
  override drained(): void {
    super.drained();
    this.slotsSoon();
  }

  /** The socket is gone (the server closed it, or it broke): every stream is told. */
  closed(why = "the service closed the connection"): void {
    this.finish(why, false);
  }

  // -- what the owner does ----------------------------------------------------------------------------

  /** Ends the connection now with `code` (GOAWAY, then close once it is written); streams in flight end with `why`. */
  close(code: number = ErrorCode.NO_ERROR, why = "the connection was closed"): void {
    if (this.closing) return;
    this.out.goaway(0, code, code === ErrorCode.NO_ERROR ? "" : why);
    this.finish(why, false, true);
  }

  // -- the client's part of the endpoint ------------------------------------------------------------------

  /** @internal The sweep: the server's SETTINGS in time, and an idle connection closed. */
  protected checkClocks(now: number): void {
    if (!this.ready) {
      const wait = this.limits.settingsTimeoutMs;
      if (now - this.openedAt >= wait) this.close(ErrorCode.SETTINGS_TIMEOUT, `no HTTP/2 SETTINGS from the service within ${Math.round(wait / 1000)} s: does it speak HTTP/2?`);
      return;
    }
    if (this.streams.size === 0 && now - this.idleSince >= this.limits.idleTimeoutMs) this.close(ErrorCode.NO_ERROR, "idle");
  }

  protected headerBlock(id: number, endStream: boolean, block: Uint8Array): void {
    readResponseBlock(this, id, endStream, block, this.limits.maxHeaderListBytes);
  }

  protected settingsApplied(maxConcurrentStreams: number | undefined): void {
    if (maxConcurrentStreams !== undefined) this.peerMaxStreams = maxConcurrentStreams;
    this.slotsSoon();
  }

  /** The server opens no more streams of ours: those past its last were never processed, and may go elsewhere. */
  protected receivedGoaway(last: number, code: number): void {
    this.goneAway = true;
    const why = `the service went away (GOAWAY ${errorName(code)})`;
    for (const s of [...this.streams.values()]) if (s.id > last) s.fail(undefined, why, true);
    this.slotsSoon();
    if (this.streams.size === 0) this.close(ErrorCode.NO_ERROR, why);
  }

  forget(s: StreamState): void {
    this.streams.delete(s.id);
    if (this.streams.size > 0 || this.gone) return this.slotsSoon();
    this.idleSince = performance.now();
    this.owner.busy?.(false);
    // a connection the server said GOAWAY to closes once its last stream is done
    if (this.goneAway && !this.closing) return this.close(ErrorCode.NO_ERROR, "the service went away");
    this.slotsSoon();
  }

  // -- the end ------------------------------------------------------------------------------------------

  private slotsSoon(): void {
    if (this.slotsDue || this.closing) return;
    this.slotsDue = true;
    queueMicrotask(this.tellSlots);
  }

  protected failed(err: unknown): void {
    if (!(err instanceof ConnectionError)) {
      const why = `the HTTP/2 client failed: ${String((err as Error)?.message ?? err).slice(0, 120)}`;
      this.out.goaway(0, ErrorCode.INTERNAL_ERROR, "");
      return this.finish(why, false, true);
    }
    // an HTTP/1.1 server answers the preface with a status line: say so rather than what its bytes look like as a frame
    const why =
      !this.ready && this.firstByte === H
        ? "the service answered in HTTP/1.1: it does not speak HTTP/2 with prior knowledge (h2c)"
        : `the service broke HTTP/2 (${errorName(err.code)}: ${err.message})`;
    this.out.goaway(0, err.code, err.message);
    this.finish(why, false, true);
  }

  protected overflowed(): void {
    this.finish("the service does not read what the agent sends", true);
  }

  /**
   * The one end of the connection: every stream told `why`, the socket
   * closed (`polite`: once what waits is written; else at once) or already
   * gone, the owner told once.
   */
  private finish(why: string, cut: boolean, polite = false): void {
    if (this.gone) return;
    this.gone = this.closing = true;
    unwatch(this);
    for (const s of [...this.streams.values()]) s.fail(undefined, why);
    if (polite) this.out.close();
    else if (cut) this.out.terminate();
    else this.out.drop();
    if (this.streams.size === 0) this.owner.busy?.(false);
    this.owner.closed(why, this.ready);
  }
}
