/**
 * A visitor connection that speaks HTTP/2: the engine (src/http2) on the
 * HttpConnection the public port made, which it occupies for good (its
 * bytes, drains, end and close go to the engine; the engine writes, closes
 * and cuts through it). So an h2 connection has what every visitor
 * connection has: its place in the budgets, its writes queued with
 * backpressure, the port's stop. Each request stream goes to `request`.
 */
import { Http2ServerConnection } from "../../http2/connection.ts";
import type { Http2Limits } from "../../http2/limits.ts";
import type { H2Stream } from "../../http2/stream.ts";
import type { HttpConnection, Occupant } from "../http-connection.ts";

export class H2Session implements Occupant {
  readonly engine: Http2ServerConnection;

  constructor(
    readonly conn: HttpConnection,
    limits: Http2Limits,
    request: (stream: H2Stream, session: H2Session) => void,
  ) {
    this.engine = new Http2ServerConnection(
      {
        write: (bytes) => conn.write(bytes),
        close: () => conn.close(),
        terminate: () => conn.terminate(),
        peer: conn.peer,
      },
      limits,
      { request: (stream) => request(stream, this) },
    );
    conn.occupy(this);
  }

  // Occupant: the connection's events

  data(bytes: Uint8Array): void {
    this.engine.received(bytes);
  }

  drained(): void {
    this.engine.drained();
  }

  ended(): void {
    this.engine.ended();
  }

  closed(): void {
    this.engine.closed();
  }

  /** The edge is stopping: GOAWAY, no new stream; the connection closes once those in flight are done. */
  goAway(): void {
    this.engine.goAway();
  }
}
