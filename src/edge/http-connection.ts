/**
 * One visitor's connection on the public port, read as HTTP/1.1 by burrow
 * itself: request heads are gathered and parsed here (src/http), each
 * request is handed to whoever serves it (an exchange with a tunnel, or an
 * answer of the edge's own), and while it is being served the connection
 * belongs to it: the request's body, and after a protocol switch every
 * byte, go to that occupant. Bytes of a next request sent early
 * (pipelining) wait, bounded, until the occupant lets go.
 *
 * Time limits, checked by one shared sweep (never a timer per connection):
 * a head must arrive whole within --idle-timeout of its first byte (a
 * slow-loris sender trickling bytes does not reset it), and a connection
 * with no request in flight closes after --idle-timeout. A request in
 * flight (a long poll, a download) is never cut by either.
 */
import type { Socket } from "bun";
import { hasBareLf, HeadReader, headTextOf } from "../http/head-reader.ts";
import { isRefusal, parseRequestHead, type HeadRefusal, type RequestHead } from "../http/request-head.ts";
import { requestHeadOf } from "../http/request-head-bytes.ts";
import { responseBytes } from "../http/response-bytes.ts";
import { PendingWrites } from "../sockets/pending-writes.ts";
import type { Peer } from "../sockets/tls-terminators.ts";
import type { HostRoute } from "./host-route.ts";
import type { RequestStream } from "./request-stream.ts";

/** A request head (request line and fields) may be this large by default (--max-request-head); more is refused with 431. */
export const MAX_REQUEST_HEAD_BYTES = 64 * 1024;

/** What a connection allows its visitor's heads, and how long it waits. */
export interface HeadLimits {
  /** --idle-timeout: for a head to arrive whole from its first byte, and for the next request. */
  idleTimeoutMs: number;
  /** --max-request-head */
  maxHeadBytes: number;
  /** --max-request-fields */
  maxFields: number;
  /** --max-read-ahead: bytes of pipelined requests (or an upgrade's first bytes) held while one is served; past this the socket is not read. */
  maxReadAheadBytes: number;
  /** A connection that starts with HTTP/2's preface goes to the server's http2 (--h2-prior-knowledge, on a plain port). */
  priorKnowledge?: boolean;
}
/** --max-read-ahead's default. */
export const MAX_READ_AHEAD_BYTES = 64 * 1024;
const SWEEP_MS = 1_000;
/** HTTP/2's connection preface (RFC 9113 §3.4) as a head reader reads it: a request line, then "SM\r\n\r\n" after its blank line. */
const PREFACE_LINE = "PRI * HTTP/2.0";
const PREFACE_HEAD = Buffer.from(`${PREFACE_LINE}\r\n\r\n`, "latin1");
const BARE_LF: HeadRefusal = { status: 400, why: "Request lines must end in CRLF." };

/** Who has the connection while a request is served. */
export interface Occupant {
  /** Bytes from the visitor. An occupant that has all of its request hands the rest back (HttpConnection.unread). */
  data(bytes: Uint8Array): void;
  /** Everything the connection had queued for the visitor has been written. */
  drained?(): void;
  /** The visitor half-closed its side. */
  ended?(): void;
  /** The connection is gone (the visitor left, or the edge closed it). */
  closed(): void;
  /** The edge is stopping: an occupant that serves several requests at once (HTTP/2) takes no new one and ends once those in flight are done. */
  goAway?(): void;
}

export interface ConnectionServer {
  /** The name lengths of the fields the server reads (RequestHead.fields holds only those, and the parser's own). */
  readonly fieldLengths?: ReadonlySet<number>;
  /**
   * A parsed request: serve it (the connection is held until release or
   * close). `headText`: the head's text (without its blank line) when it
   * was read as text; undefined when it was read from its bytes, whose text
   * conn.headText() makes while the server decides synchronously.
   */
  request(conn: HttpConnection, head: RequestHead, headText: string | undefined): void;
  /** A head that could not be parsed: the answer to give before closing. */
  refused(conn: HttpConnection, refusal: HeadRefusal): Response;
  /** The connection closed (its place in the budget goes back). */
  closed(conn: HttpConnection): void;
  /**
   * The visitor speaks HTTP/2 on this connection (ALPN chose h2, or it
   * began with the preface): it occupies the connection for good. `first`:
   * what was read of it already (the preface's first line read as a head,
   * the bytes after it).
   */
  http2?(conn: HttpConnection, first: Uint8Array[]): void;
}

export interface SocketData {
  conn?: HttpConnection;
}

const open = new Set<HttpConnection>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweep(): void {
  const now = performance.now();
  for (const c of open) c.expireIfIdle(now);
}

export class HttpConnection {
  private readonly heads: HeadReader;
  private readonly out: PendingWrites;
  private occupant: Occupant | undefined;
  /** Bytes read but not yet handled (a pipelined request, or what came while a head was routed). */
  private early: Uint8Array[] = [];
  private earlyBytes = 0;
  /** When the current head's first byte came (0: none pending); when the connection fell idle. */
  private headSince = 0;
  private idleSince: number;
  private closeAfterWrites = false;
  /** The visitor half-closed: no request follows the one in flight. */
  private peerEnded = false;
  private closing = false;
  private paused = false;
  /** Requests served on this connection. */
  served = 0;
  /** Bytes read from the visitor's socket and written to it, so far (after TLS is taken off, before it is put on): `conn.bytes_in`, `conn.bytes_out` (HTTP/2's session's too, all its streams). */
  bytesIn = 0;
  bytesOut = 0;
  /** When it opened (ms since the epoch): a traffic policy's conn.ts.start. */
  readonly openedAt = Date.now();
  /** The tunnel policy layers whose on_tcp_connect let this connection through (traffic-policy/connect.ts): asked again for others. */
  policyConnected: object | undefined;
  /** Set by the server at the first request: who the visitor is, for the budget and the rules. */
  client: string | undefined;
  /** The peer's address in its canonical form, made at the first request that names no other client. */
  peerClient: string | undefined;
  /** The budget's key while the connection holds a place. */
  counted: string | undefined;
  /** Handed over to the loopback server (an agent's or node's WebSocket): no visitor request. */
  handedOver = false;
  /** The stream its last request went to an agent on, kept for the next (request-stream.ts). */
  parked: RequestStream | undefined;
  /** Its last request's Host, as routing read it (visitor-requests.ts). */
  hostRoute: HostRoute | undefined;
  /**
   * The head being routed as its bytes came (the blank line included), while
   * the server decides on it synchronously; undefined after (the socket's
   * buffer is not ours to keep) or when it came in pieces.
   */
  headBytes: Uint8Array | undefined;
  /** The edge's X-Forwarded-*, X-Real-IP and Forwarded fields for this connection, Host and client, made once (forward.ts). */
  forwardedSuffix: { host: string; client: string; text: string; bytes?: Uint8Array } | undefined;

  constructor(
    readonly socket: Socket<SocketData>,
    readonly peer: Peer,
    private readonly server: ConnectionServer,
    private readonly limits: HeadLimits,
  ) {
    this.heads = new HeadReader(limits.maxHeadBytes);
    this.out = new PendingWrites(socket);
    this.idleSince = performance.now();
    open.add(this);
    if (sweeper === undefined) {
      sweeper = setInterval(sweep, SWEEP_MS);
      sweeper.unref();
    }
  }

  /** No request in flight. */
  get idle(): boolean {
    return this.occupant === undefined && this.headSince === 0 && !this.closing;
  }

  get busy(): boolean {
    return this.occupant !== undefined;
  }

  /** The connection is closing or closed: nothing more is served on it. */
  get closedAlready(): boolean {
    return this.closing;
  }

  // -- socket events (the listener's handlers call these) -----------------------------------------

  received(bytes: Uint8Array): void {
    if (this.closing) return;
    this.bytesIn += bytes.byteLength;
    if (this.occupant) return this.occupant.data(bytes);
    if (this.early.length > 0 || this.routing) return this.hold(bytes);
    this.readHeads(bytes);
  }

  drain(): void {
    if (!this.out.flush()) return;
    if (this.closeAfterWrites) return this.endNow();
    this.occupant?.drained?.();
  }

  ended(): void {
    this.peerEnded = true;
    if (this.occupant) return this.occupant.ended?.();
    // nothing in flight: the visitor is done with the connection (a request being routed is still answered)
    if (!this.routing) this.close();
  }

  closedBySocket(): void {
    if (!open.delete(this)) return;
    this.closing = true;
    const o = this.occupant;
    this.occupant = undefined;
    o?.closed();
    const parked = this.parked;
    this.parked = undefined;
    parked?.drop();
    this.server.closed(this);
  }

  // -- what an occupant or the server does ------------------------------------------------------------

  /** Set while the server decides on a head (async routing): bytes meanwhile are held. */
  routing = false;

  /** Hands the connection to `occupant` until release(). */
  occupy(occupant: Occupant): void {
    this.routing = false;
    this.occupant = occupant;
  }

  /**
   * The occupant lets go before the request is served: it read ahead for
   * the server (a body a traffic policy reads), which goes on deciding;
   * bytes from now on are held, as while a head is routed.
   */
  vacate(): void {
    this.occupant = undefined;
    this.routing = true;
  }

  /** Bytes the occupant read past its request: the next request's, handled after release. */
  unread(bytes: Uint8Array): void {
    if (bytes.byteLength > 0) this.hold(bytes);
  }

  /** Writes to the visitor; false when some of it waits for the socket (drained() follows). `copy`: the caller reuses `bytes` (what waits is copied). */
  write(bytes: Uint8Array, copy = false): boolean {
    if (this.closing) return false;
    this.bytesOut += bytes.byteLength;
    return this.out.write(bytes, copy);
  }

  get writesPending(): number {
    return this.out.queued;
  }

  /** Stops reading the visitor (its bytes have nowhere to go yet). */
  pause(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  /** The request is served: the next one is read, or (`keepAlive` false) the connection closes once written. */
  release(keepAlive: boolean): void {
    this.occupant = undefined;
    this.routing = false;
    this.served++;
    if (!keepAlive || this.closing || this.peerEnded) return this.close();
    this.idleSince = performance.now();
    this.resume();
    if (this.early.length === 0) return;
    const bytes = this.early.length === 1 ? this.early[0]! : Buffer.concat(this.early);
    this.early = [];
    this.earlyBytes = 0;
    this.readHeads(bytes);
  }

  /** Answers with a Response of the edge's own and then releases (or closes). */
  async answer(res: Response, head: { method: string; keepAlive: boolean } | undefined, keepAlive: boolean): Promise<void> {
    const closes = !keepAlive || !head?.keepAlive || res.headers.get("connection")?.toLowerCase() === "close";
    let bytes: Uint8Array;
    try {
      bytes = await responseBytes(res, { head: head?.method === "HEAD", close: closes });
    } catch {
      return this.close(); // a body that would not be read: nothing sensible to send
    }
    this.write(bytes);
    this.release(!closes);
  }

  /** A stop: an idle connection closes; one with an occupant that serves several requests (HTTP/2) stops taking new ones. */
  closeIfIdle(): boolean {
    if (!this.idle) {
      this.occupant?.goAway?.();
      return false;
    }
    this.close();
    return true;
  }

  /** Closes once everything written has gone out. */
  close(): void {
    if (this.closing) return;
    this.closing = true;
    this.routing = false;
    if (this.out.empty) this.endNow();
    else this.closeAfterWrites = true;
  }

  /** Closes at once, whatever waits (a broken exchange). */
  terminate(): void {
    this.closing = true;
    this.out.clear();
    this.socket.terminate();
  }

  /** Called by the sweep: closes an idle connection past the idle timeout, or a head too slow. */
  expireIfIdle(now: number): void {
    if (this.closing || this.occupant || this.routing) return;
    const since = this.headSince || this.idleSince;
    if (now - since >= this.limits.idleTimeoutMs) this.terminate();
  }

  // -- reading heads ------------------------------------------------------------------------------------

  private hold(bytes: Uint8Array): void {
    // the socket may hand us its buffer again: keep a copy
    this.early.push(bytes.slice());
    this.earlyBytes += bytes.byteLength;
    if (this.earlyBytes > this.limits.maxReadAheadBytes) this.pause();
  }

  private readHeads(bytes: Uint8Array): void {
    const read = this.heads.read(bytes, 0, true, false);
    if (read === "incomplete") {
      if (this.headSince === 0) this.headSince = performance.now();
      return;
    }
    if (read === "too-large") return this.refuse({ status: 431, why: "The request head is too large." });
    if (read === "bare-lf") return this.refuse(BARE_LF);
    this.headSince = 0;
    const raw = read.raw!;
    const fields = this.server.fieldLengths ?? true;
    // the common head read from its bytes; any other from its text, which says what is wrong with it
    let head: RequestHead | HeadRefusal | undefined = requestHeadOf(raw, fields, this.limits.maxFields);
    let text: string | undefined;
    if (head === undefined) {
      if (hasBareLf(raw)) return this.refuse(BARE_LF);
      text = headTextOf(raw);
      head = parseRequestHead(text, fields, this.limits.maxFields);
      if (isRefusal(head)) {
        // HTTP/2 with prior knowledge: its preface reads as a head in a version not spoken here (looked at only then)
        if (this.served === 0 && text === PREFACE_LINE && this.limits.priorKnowledge && this.server.http2) return this.server.http2(this, [PREFACE_HEAD, bytes.subarray(read.next)]);
        return this.refuse(head);
      }
    }
    this.routing = true;
    if (read.next < bytes.byteLength) this.hold(bytes.subarray(read.next));
    this.headBytes = raw;
    try {
      this.server.request(this, head, text);
    } finally {
      this.headBytes = undefined;
    }
  }

  /** The text of the head being routed (without its blank line), from its bytes: only while the server decides on it synchronously. */
  headText(): string {
    if (!this.headBytes) throw new Error("the head's bytes are gone: its text must be kept before routing waits");
    return headTextOf(this.headBytes);
  }

  private refuse(refusal: HeadRefusal): void {
    this.heads.reset();
    this.headSince = 0;
    this.routing = true; // nothing more is read from a sender whose framing cannot be trusted
    void this.answer(this.server.refused(this, refusal), undefined, false);
  }

  /** Early bytes for the occupant that just took the connection (its request's body). */
  takeEarly(): Uint8Array | undefined {
    if (this.early.length === 0) return undefined;
    const bytes = this.early.length === 1 ? this.early[0]! : Buffer.concat(this.early);
    this.early = [];
    this.earlyBytes = 0;
    this.resume();
    return bytes;
  }

  private endNow(): void {
    this.closeAfterWrites = false;
    this.socket.end();
  }
}
