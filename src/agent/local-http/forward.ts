/**
 * An h1 stream's requests to the local service, from its OPEN to its end:
 * for each head the request its server makes of it (http.ts, asked, never
 * asking back), a connection from the pool (or a new one), an exchange
 * on it (exchange.ts), and one more on a new connection when a kept-alive
 * one turns out to have been closed by the service before it saw the
 * request. The stream's FIN and reset are heard here, once, whichever
 * request and attempt is under way.
 *
 * A stream opened with `keep` (protocol/messages.ts OpenMeta) carries a
 * visitor connection's requests one after another: after a response the
 * exchange leaves the stream open when it can carry another, and the next
 * request's head is read here from the stream's bytes, its body left in
 * the stream for the exchange that sends it.
 *
 * A service that speaks HTTP/2 (upstreamProtocol) takes each request as a
 * stream of its one connection instead (h2-exchange.ts), but for a request
 * that asks to switch protocols, which HTTP/2 cannot carry: it goes over
 * HTTP/1.1 to the same address, as it would to any service.
 *
 * One request follows another by callbacks, not promises: this runs for
 * every request, and a promise, its reactions and an async frame each add
 * up (a new connection's connect is the one thing awaited).
 */
import { HeadReader } from "../../http/head-reader.ts";
import { ResponseParser, type ResponseSink } from "../../http/response-reader.ts";
import type { Stream } from "../../protocol/mux.ts";
import { MAX_PAYLOAD, WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import { describeLocalError } from "../local-target.ts";
import { Exchange, resetReason, type ExchangeReport, type Outcome, type VisitorSide } from "./exchange.ts";
import type { LocalConnection } from "./connection.ts";
import { H2Exchange } from "./h2-exchange.ts";
import type { ConnectionPool, LocalService } from "./pool.ts";
import type { LocalRequest } from "./request.ts";

/** A request ready to go to the service: what it gets, who hears how it went, and where it goes. */
export interface ServedRequest {
  request: LocalRequest;
  report: ExchangeReport;
  /** The inspector's copy, shown the bodies (without their framing) as they pass. */
  tap: ExchangeTap | undefined;
  /** A path route's service; undefined: the tunnel's. */
  service: LocalService | undefined;
}

/**
 * What each head of the stream becomes (http.ts: the head read, the
 * tunnel's rules applied, the log and the inspector told), and what hears
 * the stream's end. Called by the stream's requests, never calling back:
 * the requests own the stream's trip from one head to the next.
 */
export interface StreamServer {
  /**
   * A request head came: the request to carry, or undefined when it cannot be served (the server has
   * reset the stream or answered it). OPEN's comes as `text`; one in the stream's bytes as `received`,
   * its bytes as they came (both with the blank line).
   */
  request(text: string | undefined, received?: Uint8Array): ServedRequest | undefined;
  /** No more requests: the stream is over (or ends with the last response). */
  over(): void;
  /** An exception while a request was made or sent on its way: the stream is over. */
  threw(err: unknown): void;
  /** A head in the stream's bytes that cannot be read: answered (a private tunnel's connector is told 400), or the stream reset. */
  unreadable(why: string): void;
  /** No answer from the service: true when the server answered it on the stream (a private tunnel's connector is told 502), false to reset the stream. */
  noAnswer(why: string, replied: boolean): boolean;
}

export class StreamRequests implements VisitorSide {
  private current: Exchange | H2Exchange | undefined;
  /** The stream's reset code, once it is reset. */
  private gone: string | undefined;
  ended = false;
  replied = false;
  /** Between requests on a kept stream: the next head, gathered from DATA. */
  private heads: HeadReader | undefined;
  private waitingForHead = false;
  /** The request under way, for another attempt after a stale connection. */
  private request: LocalRequest | undefined;
  private report: ExchangeReport | undefined;
  private tap: ExchangeTap | undefined;
  private isOver = false;
  /** The connection the last request went on, kept for the next one on this stream (a kept stream between requests). */
  private held: LocalConnection | undefined;

  readonly body = (chunk: Uint8Array): void => {
    if (this.current) this.current.takeBody(chunk);
    else this.stream.consumed(chunk.byteLength);
  };

  readonly drained = (): void => this.current?.streamDrained();

  /** Where the request under way goes: the tunnel's service, or a path route's (forward()). */
  private service: LocalService;

  constructor(
    private readonly stream: Stream,
    private readonly tunnelService: LocalService,
    private readonly pool: ConnectionPool,
    readonly keep: boolean,
    private readonly server: StreamServer,
  ) {
    this.service = tunnelService;
    // the visitor left (or the edge gave up waiting): drop the local request too, so it holds no connection
    stream.whenReset((code) => {
      this.gone = code;
      this.current?.abandon(code);
      if (this.waitingForHead) this.finish();
    });
    stream.onEnd = () => {
      this.ended = true;
      if (this.current) return this.current.visitorEnded();
      // waiting for the next request: the visitor's connection is over, and so is the stream
      // (before the first exchange, and between one and that wait, the FIN is for what follows)
      if (!this.waitingForHead) return;
      stream.end();
      this.finish();
    };
  }

  /** Serves the first request, whose head came in OPEN. */
  begin(text: string): void {
    this.serve(text, undefined);
  }

  /** Serves a stream whose first head comes in its bytes too (a private tunnel's connection). */
  beginFromBytes(): void {
    this.nextHead();
  }

  /**
   * A head: made a request by the server, carried to the service, and its response into the stream;
   * the next head is read after it when the stream carries another.
   */
  private serve(text: string | undefined, received: Uint8Array | undefined): void {
    try {
      const served = this.server.request(text, received);
      if (served) {
        this.request = served.request;
        this.report = served.report;
        this.tap = served.tap;
        this.service = served.service ?? this.tunnelService;
        return this.attempt(true);
      }
    } catch (err) {
      this.server.threw(err);
    }
    this.finish();
  }

  private attempt(mayReuse: boolean): void {
    if (this.service.upstreamProtocol !== undefined && this.request!.head.upgrade === undefined) return this.exchangeOverH2(!mayReuse);
    const conn = mayReuse ? (this.takeHeld(this.service) ?? this.pool.take(this.service)) : undefined;
    if (conn) return this.exchangeOn(conn);
    this.openThenExchange();
  }

  /** A new connection first (a function of its own: its closures would cost every attempt a scope). */
  private openThenExchange(): void {
    this.pool.open(this.service).then(
      (opened) => this.exchangeOn(opened),
      (err) => this.exchangeOn(err instanceof Error ? err : new Error(String(err))),
    );
  }

  private exchangeOn(conn: LocalConnection | Error): void {
    const { stream, request, report, tap } = this;
    if (this.gone !== undefined) {
      if (!(conn instanceof Error)) this.pool.put(conn); // nothing was written on it
      tap?.failed(resetReason(this.gone));
      report!.cancelled();
      return this.finish();
    }
    if (conn instanceof Error) {
      const why = describeLocalError(conn);
      if (!this.noAnswer(why)) stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
      tap?.failed(why);
      report!.failed(why);
      return this.finish();
    }
    const exchange = new Exchange(stream, conn, request!, this.pool, report!, this, tap);
    this.current = exchange;
    exchange.run();
  }

  /** A request to a service that speaks HTTP/2: a stream of its connection; `retry`: the second attempt, after the service refused the first unprocessed. */
  private exchangeOverH2(retry: boolean): void {
    const { stream, report, tap } = this;
    if (this.gone !== undefined) {
      tap?.failed(resetReason(this.gone));
      report!.cancelled();
      return this.finish();
    }
    // the stream's last connection to another service waits in the pool, not for this stream
    const held = this.takeHeld();
    if (held) this.pool.put(held);
    const exchange = new H2Exchange(stream, this.pool.h2.of(this.service), this.service, this.request!, report!, this, tap, retry);
    this.current = exchange;
    exchange.run();
  }

  private parser: ResponseParser | undefined;

  /** VisitorSide: the stream's response parser, reset for the next response. */
  parserFor(method: string, sink: ResponseSink): ResponseParser {
    if (!this.parser) return (this.parser = new ResponseParser(method, sink, false));
    this.parser.reset(method, sink, false);
    return this.parser;
  }

  /** VisitorSide: the connection the exchange went on, for the stream's next request. */
  hold(conn: LocalConnection): boolean {
    if (this.isOver || this.held) return false;
    this.pool.hold(conn);
    this.held = conn;
    return true;
  }

  /** The connection the stream's last request went on; `service`: only if it is to that service (a path route may send the next request elsewhere). */
  private takeHeld(service?: LocalService): LocalConnection | undefined {
    const conn = this.held;
    if (!conn) return undefined;
    this.held = undefined;
    const back = this.pool.unhold(conn);
    if (!back || service === undefined || this.pool.serves(back, service)) return back;
    this.pool.put(back); // another service's: it waits in the pool for its own
    return undefined;
  }

  /** VisitorSide: the request under way has no answer (nothing of one went); true when it was answered on the stream. */
  noAnswer(why: string): boolean {
    if (!this.server.noAnswer(why, this.replied)) return false;
    this.replied = true;
    return true;
  }

  /** VisitorSide: the exchange under way is over. */
  settled(outcome: Outcome): void {
    const exchange = this.current;
    this.current = undefined;
    // once only: a new connection is never stale
    if (outcome === "stale") return this.attempt(false);
    this.request = this.report = this.tap = undefined;
    if (!exchange?.keptStream) return this.finish();
    this.nextHead();
  }

  /** Reads the next request's head on a kept stream (the stream's end or reset ends the wait). */
  private nextHead(): void {
    if (this.gone !== undefined) return this.finish();
    if (this.ended) {
      this.stream.end(); // the edge's FIN came as the last response went: this side ends too
      return this.finish();
    }
    this.waitingForHead = true;
    this.heads ??= new HeadReader(MAX_PAYLOAD);
    this.stream.onData = this.headBytes;
  }

  private readonly headBytes = (chunk: Uint8Array): void => {
    const { stream } = this;
    // as bytes: the head is read from them (http.ts), made text only when it must be
    const read = this.heads!.read(chunk, 0, true, false);
    if (read === "incomplete") return stream.consumed(chunk.byteLength); // held (a copy) by the reader
    if (typeof read === "string") {
      this.waitingForHead = false;
      stream.onData = undefined;
      stream.consumed(chunk.byteLength);
      this.server.unreadable(read);
      return this.finish();
    }
    this.waitingForHead = false;
    stream.onData = undefined;
    stream.consumed(read.next);
    // the body's first bytes, if they came with the head: they wait in the stream for the exchange
    if (read.next < chunk.byteLength) stream.unread(chunk.subarray(read.next));
    this.serve(undefined, read.raw!);
  };

  private finish(): void {
    this.waitingForHead = false;
    if (this.isOver) return;
    this.isOver = true;
    // the stream is over: its connection serves other streams
    const held = this.takeHeld();
    if (held) this.pool.put(held);
    this.server.over();
  }
}
