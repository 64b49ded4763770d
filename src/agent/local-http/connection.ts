/**
 * One TCP (or TLS) connection to the local service, carrying one request at
 * a time. Its socket events go to the request it carries (its user); an
 * idle connection has none, and anything that happens to it (bytes, a
 * close) ends it. Bun's socket.write is unbuffered: what the socket does not
 * take waits here, in order, and goes out on drain.
 *
 * Connections are half-open capable: after a 101 the connection carries
 * another protocol, whose two directions end apart (the service's FIN is
 * not the end of what the visitor may still send). For HTTP, the service's
 * FIN ends the connection as before.
 */
import { runtime } from "../../runtime/current.ts";
import type { RuntimeSocket, SocketHandlers } from "../../runtime/types.ts";
import { isIP } from "node:net";
import { PendingWrites } from "../../sockets/pending-writes.ts";
import type { Dialer } from "../local-target.ts";

export interface ConnectionUser {
  received(bytes: Uint8Array): void;
  /** Everything written so far is in the socket. */
  drained(): void;
  /** The service closed or reset the connection. Not called after our own close() or destroy(). */
  lost(error: Error | undefined): void;
  /**
   * The service half-closed (its FIN): it sends no more, but may still read.
   * A user without it hears lost() instead, and the connection closes.
   */
  ended?(): void;
}

/** One handler object for every connection: the events find their connection in socket.data. */
const handlers: SocketHandlers<LocalConnection> = {
  open: (socket) => void socket.setNoDelay(true), // a request head and its body are separate writes: no Nagle delay between them
  data: (socket, bytes) => socket.data.onData(bytes),
  drain: (socket) => socket.data.onDrain(),
  end: (socket) => socket.data.onEnd(),
  close: (socket, error) => socket.data.onGone(error),
  error: (socket, error) => {
    socket.data.onGone(error);
    socket.terminate(); // called when one of these handlers threw: the connection's state is unknown
  },
};

export class LocalConnection {
  /** The request this connection carries now; undefined while it waits in the pool. */
  user: ConnectionUser | undefined;
  /** Requests it has carried to the end: above zero it comes from the pool, and the service may have closed it meanwhile. */
  served = 0;
  /** When it went back to the pool (performance.now()). */
  idleSince = 0;
  /** Held for a kept stream (ConnectionPool.hold): the pool's sweeps since. */
  heldSweeps = 0;
  /** Waiting, held for its stream's next request (ConnectionPool.hold; unhold takes it back). */
  holding = false;
  /** In the pool's set of held connections (held now, or taken back since the last sweep). */
  heldListed = false;
  closed = false;
  private paused = false;
  /** Our side is half-closed (shutdown()): Bun then reports the service's FIN as a close without an end. */
  halfClosed = false;
  private pending!: PendingWrites;
  private socket!: RuntimeSocket<LocalConnection>;

  private constructor(readonly key: string) {}

  /**
   * Connects (through `dial` when the service is reached another way than
   * TCP from here); a failure (refused, unreachable, a TLS handshake that failed) is
   * returned, not thrown. With `tls`, any certificate is accepted: the local
   * service is the user's own, and self-signed is normal there. `alpn`: the
   * protocols offered in TLS's ALPN (an HTTP/2 service's "h2"); which one
   * the service took is `alpnProtocol`.
   */
  static async open(hostname: string, port: number, key: string, tls = false, alpn?: string[], dial?: Dialer): Promise<LocalConnection | Error> {
    const conn = new LocalConnection(key);
    try {
      conn.socket = await (dial ?? runtime).connect({
        hostname,
        port,
        data: conn,
        socket: handlers,
        allowHalfOpen: true,
        tls: tls ? { rejectUnauthorized: false, serverName: isIP(hostname) ? undefined : hostname, ...(alpn ? { alpn } : {}) } : undefined,
      });
      conn.pending = new PendingWrites(conn.socket);
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
    return conn;
  }

  /** TLS: the protocol ALPN agreed on; false or null when none. */
  get alpnProtocol(): string | false | null {
    return this.socket.alpnProtocol ?? null;
  }

  /** Nothing waits to be written. */
  get flushed(): boolean {
    return this.pending.empty;
  }

  /** Writes bytes in order; false when some wait for the socket to drain (the user hears drained()). */
  write(bytes: Uint8Array): boolean {
    if (this.closed) return false;
    return this.pending.write(bytes);
  }

  /** Stops reading from the service (the tunnel stream is out of credit). */
  pause(): void {
    if (this.closed || this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  resume(): void {
    if (this.closed || !this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  /** Whether this connection keeps the process running: an idle one must not (the agent exits when its work is done). */
  keepsProcessAlive(yes: boolean): void {
    if (this.closed) return;
    if (yes) this.socket.ref();
    else this.socket.unref();
  }

  /** Half-closes our side (our FIN) once what waits is written; the service may still send. */
  shutdown(): void {
    if (this.closed || this.halfClosed) return;
    this.halfClosed = true;
    this.socket.shutdown();
  }

  /** Ends the connection politely: it is not reused, but nothing went wrong. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.user = undefined;
    this.pending.clear();
    this.socket.end();
  }

  /** Ends the connection at once (a reset): the request it carried was abandoned or failed. */
  destroy(): void {
    if (this.closed) return;
    this.closed = true;
    this.user = undefined;
    this.pending.clear();
    this.socket.terminate();
  }

  // -- socket events, called by the handlers above ----------------------------------------

  onData(bytes: Uint8Array): void {
    if (this.user) this.user.received(bytes);
    else this.destroy(); // a service talking on an idle connection is not speaking HTTP/1.1 as we do
  }

  onEnd(): void {
    if (this.closed) return;
    if (this.user?.ended) return this.user.ended();
    // allowHalfOpen leaves our side open: a connection nobody reads half-open is over, so end it too
    this.onGone(undefined);
    this.socket.end();
  }

  onDrain(): void {
    if (this.pending.flush()) this.user?.drained();
  }

  onGone(error: Error | undefined): void {
    if (this.closed) return;
    this.closed = true;
    this.pending.clear();
    const user = this.user;
    this.user = undefined;
    user?.lost(error);
  }
}
