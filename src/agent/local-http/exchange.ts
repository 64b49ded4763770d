/**
 * One visitor request carried to the local service and its response back,
 * over a pooled connection, with credit both ways:
 *
 * - the request body goes to the socket as the tunnel stream delivers it,
 *   and its credit returns only once the socket has taken it, so a slow
 *   service holds the visitor back instead of the agent's memory;
 * - the response body goes into the stream as it arrives, and the socket
 *   stops being read while the stream is out of credit.
 *
 * A small response with a known length goes out whole: REPLY and one DATA
 * that carries the FIN, in one message.
 */
import type { ResponseHead } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import { MAX_DATA_PAYLOAD, WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import type { ConnectionUser, LocalConnection } from "./connection.ts";
import { replyHeaders, type ParsedHead } from "../../http/response-head.ts";
import type { ConnectionPool } from "./pool.ts";
import { frameChunk, LAST_CHUNK, type LocalRequest } from "./request.ts";
import { ResponseParser, type ResponseSink } from "../../http/response-reader.ts";

export interface ExchangeReport {
  /** The final response head arrived: the moment the request log measures. */
  responded(status: number): void;
  /** There will be no response (no connection, or one that failed or answered nonsense); the stream is still to be reset. */
  failed(why: string | Error): void;
  /** The visitor left before the response head came. */
  cancelled(): void;
}

export interface LocalService {
  host: string;
  port: number;
}

/** "stale": a pooled connection the service had already closed; nothing of the request was lost, so it may go again. */
type Outcome = "done" | "stale";

/**
 * Carries `request` to the service and its response into `stream`; resolves when the exchange is over. Never throws.
 * `tap`: the inspector's copy, shown the body pieces as they pass.
 */
export async function forwardRequest(
  stream: Stream,
  request: LocalRequest,
  service: LocalService,
  pool: ConnectionPool,
  report: ExchangeReport,
  tap?: ExchangeTap,
): Promise<void> {
  let current: Exchange | undefined;
  let gone = false;
  // the visitor left (or the edge gave up waiting): drop the local request too, so it holds no connection
  stream.whenReset(() => {
    gone = true;
    current?.abandon();
  });
  let mayReuse = true;
  for (;;) {
    const conn = (mayReuse ? pool.take(service.host, service.port) : undefined) ?? (await pool.open(service.host, service.port));
    if (gone) {
      if (!(conn instanceof Error)) pool.put(conn); // nothing was written on it
      return report.cancelled();
    }
    if (conn instanceof Error) return report.failed(conn);
    current = new Exchange(stream, conn, request, pool, report, tap);
    if ((await current.run()) === "done") return;
    // once only: a new connection is never stale
    mayReuse = false;
  }
}

class Exchange implements ConnectionUser, ResponseSink {
  private readonly parser: ResponseParser;
  private settle: (outcome: Outcome) => void = () => {};
  private finished = false;
  private responded = false;
  private reply: ResponseHead | undefined;
  /** How the response body goes into the stream. */
  private mode: "none" | "whole" | "streamed" = "none";
  /** The body of a "whole" response, as it arrived. */
  private pieces: Uint8Array[] = [];
  private keepAlive = false;
  /** Something of the visitor's body (bytes or its end) was taken from the stream: the request cannot go again. */
  private bodyTaken = false;
  /** The request body has been handed to the connection in full. */
  private bodyDone: boolean;
  private bodyBytes = 0;
  /** Body bytes handed to the connection but not yet taken by the socket: their credit waits. */
  private uncredited = 0;

  constructor(
    private readonly stream: Stream,
    private readonly conn: LocalConnection,
    private readonly request: LocalRequest,
    private readonly pool: ConnectionPool,
    private readonly report: ExchangeReport,
    private readonly tap: ExchangeTap | undefined,
  ) {
    this.parser = new ResponseParser(request.method, this);
    this.bodyDone = request.body.kind === "none";
  }

  run(): Promise<Outcome> {
    const { promise, resolve } = Promise.withResolvers<Outcome>();
    this.settle = resolve;
    const { stream, conn } = this;
    conn.user = this;
    if (conn.closed) {
      // the service closed it while we waited for the connect to finish
      this.lost(undefined);
      return promise;
    }
    conn.write(this.request.head);
    if (this.request.body.kind === "none") {
      stream.onData = (chunk) => stream.consumed(chunk.byteLength);
    } else {
      stream.onData = (chunk) => this.takeBody(chunk);
      stream.onEnd = () => this.endBody();
    }
    return promise;
  }

  /** The visitor has gone: the connection goes too, mid-request, so it is never reused. */
  abandon(): void {
    if (this.finished) return;
    this.stop();
    this.conn.destroy();
    if (!this.responded) this.report.cancelled();
    this.settle("done");
  }

  // -- the request body, from the stream to the socket -----------------------------------------

  private takeBody(chunk: Uint8Array): void {
    // the response is over (complete or failed): the rest of the visitor's body has nowhere to go
    if (this.finished) return this.stream.consumed(chunk.byteLength);
    if (chunk.byteLength === 0) return; // an empty chunk would read as the chunked body's end
    this.bodyTaken = true;
    const body = this.request.body;
    this.bodyBytes += chunk.byteLength;
    if (body.kind === "length" && this.bodyBytes > body.length) return this.fail("the request body is longer than its content-length");
    this.uncredited += chunk.byteLength;
    this.tap?.requestChunk(chunk);
    if (this.conn.write(body.kind === "chunked" ? frameChunk(chunk) : chunk)) this.credit();
  }

  private endBody(): void {
    if (this.finished) return;
    this.bodyTaken = true;
    const body = this.request.body;
    if (body.kind === "length" && this.bodyBytes !== body.length) return this.fail("the request body ended short of its content-length");
    if (body.kind === "chunked") this.conn.write(LAST_CHUNK);
    this.bodyDone = true;
  }

  private credit(): void {
    if (this.uncredited === 0) return;
    this.stream.consumed(this.uncredited);
    this.uncredited = 0;
  }

  // -- connection events -------------------------------------------------------------------------

  received(bytes: Uint8Array): void {
    if (this.finished) return;
    const error = this.parser.push(bytes);
    if (error) return this.fail(error);
    // decided here, not when the parser ends the response: only now is it known whether more bytes followed it
    if (this.parser.complete) this.complete();
  }

  drained(): void {
    this.credit();
  }

  lost(error: Error | undefined): void {
    if (this.finished) return;
    const why = this.parser.closed(); // a body read until close ends here
    if (this.parser.complete) return this.complete();
    if (!this.parser.started && this.conn.served > 0 && !this.bodyTaken) {
      // the service closed this kept-alive connection just as we reused it: it saw nothing it would answer
      this.stop();
      this.stream.onData = undefined; // whatever arrives meanwhile waits in the stream for the next attempt
      this.stream.onEnd = undefined;
      return this.settle("stale");
    }
    this.fail((error as { code?: string } | undefined)?.code === "ECONNRESET" ? "the local service reset the connection" : (why ?? "the local service closed the connection"));
  }

  // -- the response, from the parser to the stream -----------------------------------------------

  head(head: ParsedHead): void {
    this.responded = true;
    this.keepAlive = head.keepAlive;
    this.report.responded(head.status);
    const reply: ResponseHead = { status: head.status, headers: replyHeaders(head) };
    this.tap?.response(reply.status, reply.headers);
    if (head.framing === "none" || (head.framing === "length" && head.length === 0)) {
      this.mode = "none";
      this.stream.reply(reply, true); // one REPLY frame that also ends the stream
    } else if (head.framing === "length" && head.length <= MAX_DATA_PAYLOAD) {
      // small and whole: held (at most MAX_DATA_PAYLOAD) to go out as REPLY + one DATA with FIN
      this.mode = "whole";
      this.reply = reply;
    } else {
      this.mode = "streamed";
      this.stream.onDrain = () => this.conn.resume();
      this.stream.reply(reply);
    }
  }

  body(piece: Uint8Array): void {
    this.tap?.responseChunk(piece);
    if (this.mode === "whole") this.pieces.push(piece);
    else if (!this.stream.write(piece)) this.conn.pause(); // out of credit: the service waits, not our memory
  }

  end(): void {
    this.tap?.done();
    if (this.mode === "whole") {
      const bytes = this.pieces.length === 1 ? this.pieces[0]! : Buffer.concat(this.pieces);
      this.pieces = [];
      this.stream.cork(() => {
        this.stream.reply(this.reply);
        this.stream.end(bytes);
      });
    } else if (this.mode === "streamed") {
      this.stream.end();
    }
  }

  // -- the end -----------------------------------------------------------------------------------

  /** The response is complete: the connection goes back to the pool if it can carry another request. */
  private complete(): void {
    this.stop();
    const conn = this.conn;
    const reusable = this.keepAlive && this.bodyDone && conn.flushed && !this.parser.overflow && !conn.closed;
    if (reusable) {
      conn.served++;
      this.pool.put(conn);
    } else {
      conn.close();
    }
    this.settle("done");
  }

  /** No (complete) response: a 502 if the visitor has seen nothing yet, else the stream is reset. */
  private fail(why: string): void {
    if (this.finished) return;
    this.stop();
    this.conn.destroy();
    if (this.responded) this.stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
    else this.report.failed(why);
    this.settle("done");
  }

  private stop(): void {
    this.finished = true;
    this.parser.stop();
    this.stream.onDrain = undefined;
    if (this.conn.user === this) this.conn.user = undefined;
    // body bytes the socket never took are as good as discarded: their credit must not go missing, or the edge waits for it forever
    this.credit();
  }
}
