/**
 * An h1 stream's requests to the local service, from its OPEN to its end:
 * for each request a connection from the pool (or a new one), an exchange
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
 */
import { HeadReader } from "../../http/head-reader.ts";
import type { Stream } from "../../protocol/mux.ts";
import { MAX_PAYLOAD, WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import { describeLocalError } from "../local-target.ts";
import { Exchange, resetReason, type ExchangeReport, type VisitorSide } from "./exchange.ts";
import type { ConnectionPool, LocalService } from "./pool.ts";
import type { LocalRequest } from "./request.ts";

const HEAD_END = "\r\n\r\n";

export class StreamRequests {
  private current: Exchange | undefined;
  /** The stream's reset code, once it is reset. */
  private gone: string | undefined;
  readonly visitor: VisitorSide;
  /** Between requests on a kept stream: the next head, gathered from DATA. */
  private heads: HeadReader | undefined;
  private nextHeadFound: ((text: string | undefined) => void) | undefined;

  constructor(
    private readonly stream: Stream,
    private readonly service: LocalService,
    private readonly pool: ConnectionPool,
    keep: boolean,
  ) {
    this.visitor = { ended: false, keep, replied: false };
    // the visitor left (or the edge gave up waiting): drop the local request too, so it holds no connection
    stream.whenReset((code) => {
      this.gone = code;
      this.current?.abandon(code);
      this.headFound(undefined);
    });
    stream.onEnd = () => {
      this.visitor.ended = true;
      if (this.current) return this.current.visitorEnded();
      // waiting for the next request: the visitor's connection is over, and so is the stream
      // (before the first exchange, and between one and that wait, the FIN is for what follows)
      if (!this.nextHeadFound) return;
      stream.end();
      this.headFound(undefined);
    };
  }

  /**
   * Carries `request` to the service and its response into the stream; resolves when the exchange is over,
   * true if the stream carries another request. Never throws.
   * `tap`: the inspector's copy, shown the bodies (without their framing) as they pass.
   */
  async forward(request: LocalRequest, report: ExchangeReport, tap?: ExchangeTap): Promise<boolean> {
    const { stream, pool, service } = this;
    let mayReuse = true;
    for (;;) {
      const conn = (mayReuse ? pool.take(service) : undefined) ?? (await pool.open(service));
      if (this.gone !== undefined) {
        if (!(conn instanceof Error)) pool.put(conn); // nothing was written on it
        tap?.failed(resetReason(this.gone));
        report.cancelled();
        return false;
      }
      if (conn instanceof Error) {
        const why = describeLocalError(conn);
        stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
        tap?.failed(why);
        report.failed(why);
        return false;
      }
      const exchange = new Exchange(stream, conn, request, pool, report, this.visitor, tap);
      this.current = exchange;
      const outcome = await exchange.run();
      this.current = undefined;
      if (outcome === "done") return exchange.keptStream;
      // once only: a new connection is never stale
      mayReuse = false;
    }
  }

  /** The next request's head on a kept stream (its blank line included), or undefined when the stream ends first. */
  nextHead(): Promise<string | undefined> {
    if (this.gone !== undefined) return Promise.resolve(undefined);
    if (this.visitor.ended) {
      this.stream.end(); // the edge's FIN came as the last response went: this side ends too
      return Promise.resolve(undefined);
    }
    const { promise, resolve } = Promise.withResolvers<string | undefined>();
    this.nextHeadFound = resolve;
    this.heads ??= new HeadReader(MAX_PAYLOAD);
    this.stream.onData = this.headBytes;
    return promise;
  }

  private readonly headBytes = (chunk: Uint8Array): void => {
    const { stream } = this;
    const read = this.heads!.read(chunk, 0);
    if (read === "incomplete") return stream.consumed(chunk.byteLength); // held (a copy) by the reader
    if (typeof read === "string") {
      // the edge sends heads it has read and checked: one that cannot be read is its fault
      stream.reset(`${WireError.UPSTREAM_FAILED} the request head cannot be read (${read})`);
      return;
    }
    stream.onData = undefined;
    stream.consumed(read.next);
    // the body's first bytes, if they came with the head: they wait in the stream for the exchange
    if (read.next < chunk.byteLength) stream.unread(chunk.subarray(read.next));
    this.headFound(`${read.text}${HEAD_END}`);
  };

  private headFound(text: string | undefined): void {
    const found = this.nextHeadFound;
    if (!found) return;
    this.nextHeadFound = undefined;
    if (text === undefined) this.stream.onData = undefined;
    found(text);
  }
}
