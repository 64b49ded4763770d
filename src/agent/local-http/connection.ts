/**
 * One TCP connection to the local service, carrying one request at a time.
 * Its socket events go to the request it carries (its user); an idle
 * connection has none, and anything that happens to it (bytes, a close)
 * ends it. Bun's socket.write is unbuffered: what the socket does not take
 * waits here, in order, and goes out on drain.
 */
import type { Socket, SocketHandler } from "bun";
import { PendingWrites } from "../../sockets/pending-writes.ts";

export interface ConnectionUser {
  received(bytes: Uint8Array): void;
  /** Everything written so far is in the socket. */
  drained(): void;
  /** The service closed or reset the connection. Not called after our own close() or destroy(). */
  lost(error: Error | undefined): void;
}

/** One handler object for every connection: the events find their connection in socket.data. */
const handlers: SocketHandler<LocalConnection> = {
  open: (socket) => void socket.setNoDelay(true), // a request head and its body are separate writes: no Nagle delay between them
  data: (socket, bytes) => socket.data.onData(bytes),
  drain: (socket) => socket.data.onDrain(),
  // allowHalfOpen is off: the service's FIN closes the socket, and a response read until close ends here
  end: (socket) => socket.data.onGone(undefined),
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
  closed = false;
  private paused = false;
  private pending!: PendingWrites;
  private socket!: Socket<LocalConnection>;

  private constructor(readonly key: string) {}

  /** Connects; a failure (refused, unreachable) is returned, not thrown. */
  static async open(hostname: string, port: number, key: string): Promise<LocalConnection | Error> {
    const conn = new LocalConnection(key);
    try {
      conn.socket = await Bun.connect({ hostname, port, data: conn, socket: handlers });
      conn.pending = new PendingWrites(conn.socket);
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
    return conn;
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
