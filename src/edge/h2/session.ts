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
import type { RequestStream } from "../request-stream.ts";
import type { Tunnel } from "../registry.ts";

/**
 * Tunnel streams a connection keeps between requests, at most: enough for
 * a page's bursts to reuse them (as a browser's six HTTP/1.1 connections
 * each keep one), without each of the connection's streams holding one,
 * and a connection to the service on the agent's side, for as long as the
 * connection lives.
 */
export const H2_KEPT_STREAMS = 8;

export class H2Session implements Occupant {
  readonly engine: Http2ServerConnection;
  /** Kept tunnel streams between requests (request-stream.ts), for the next requests to their tunnels. */
  private readonly parked: RequestStream[] = [];

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
    for (const p of this.parked.splice(0)) p.drop();
  }

  /** A kept tunnel stream that may carry a request to `tunnel` now; the others found on the way, which cannot any more, are let go. */
  takeParked(tunnel: Tunnel): RequestStream | undefined {
    const { parked } = this;
    for (let i = parked.length - 1; i >= 0; i--) {
      const p = parked[i]!;
      if (p.carries(tunnel)) {
        parked.splice(i, 1);
        return p;
      }
      if (p.tunnel !== tunnel) continue;
      parked.splice(i, 1);
      p.drop();
    }
    return undefined;
  }

  /** Keeps `carrier` for a next request, while there is room and the connection lives; else lets it go. */
  park(carrier: RequestStream): void {
    if (this.engine.closing || this.parked.length >= H2_KEPT_STREAMS) return carrier.drop();
    this.parked.push(carrier);
  }

  /** The edge is stopping: GOAWAY, no new stream; the connection closes once those in flight are done. */
  goAway(): void {
    this.engine.goAway();
  }
}
