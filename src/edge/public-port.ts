/**
 * The public port: a Bun.listen whose connections are read as HTTP/1.1 by
 * http-connection.ts. It can stop accepting for a while and start again:
 * under descriptor pressure the listening socket itself is closed (the
 * connections already open go on being served) and the port is taken again
 * once pressure is over; new visitors meanwhile see a refused connection,
 * which costs the server nothing.
 */
import type { Socket, TCPSocketListener } from "bun";
import { HttpConnection, type ConnectionServer, type SocketData } from "./http-connection.ts";

export interface PublicPortOptions {
  hostname: string;
  port: number;
  server: ConnectionServer;
  idleTimeoutS: number;
}

export class PublicPort {
  private accepting: TCPSocketListener<SocketData> | undefined;
  private readonly connections = new Set<HttpConnection>();
  readonly port: number;
  private stopped = false;
  /** Why the last try to listen again failed (its code and message); undefined after one that worked. */
  listenError: string | undefined;

  constructor(private readonly options: PublicPortOptions) {
    this.accepting = this.listen(options.port);
    this.port = this.accepting.port;
  }

  get paused(): boolean {
    return this.accepting === undefined;
  }

  pause(): void {
    this.accepting?.stop(false);
    this.accepting = undefined;
  }

  /** Listens again on the same port; false (and still paused) if the port cannot be had. */
  resume(): boolean {
    if (this.accepting) return true;
    if (this.stopped) return false;
    try {
      this.accepting = this.listen(this.port);
    } catch (err) {
      this.listenError = describeListenError(err);
      return false;
    }
    this.listenError = undefined;
    return true;
  }

  /** Closes every connection that has no request in flight; returns how many. */
  closeIdle(): number {
    let n = 0;
    for (const c of this.connections) {
      if (!c.idle) continue;
      c.close();
      n++;
    }
    return n;
  }

  /** Connections with a visitor's request in flight (not the agents' and nodes' WebSockets handed over). */
  get pendingRequests(): number {
    let n = 0;
    for (const c of this.connections) if (c.busy && !c.handedOver) n++;
    return n;
  }

  /** Stops accepting; with `force`, cuts every connection too. */
  async stop(force: boolean): Promise<void> {
    this.stopped = true;
    this.pause();
    if (force) for (const c of this.connections) c.terminate();
  }

  private listen(port: number): TCPSocketListener<SocketData> {
    const { server, idleTimeoutS } = this.options;
    const connections = this.connections;
    return Bun.listen<SocketData>({
      hostname: this.options.hostname,
      port,
      exclusive: true, // a second server on the same port must fail, not share its visitors
      allowHalfOpen: true, // a visitor that half-closes after its request still gets the answer
      socket: {
        open(socket: Socket<SocketData>) {
          // a visitor that reset before open ran has no address any more
          if (typeof socket.remoteAddress !== "string") return void socket.terminate();
          socket.setNoDelay(true);
          const conn = new HttpConnection(socket, { address: socket.remoteAddress, port: socket.remotePort }, server, idleTimeoutS * 1000);
          socket.data = { conn };
          connections.add(conn);
        },
        data: (socket, bytes) => socket.data.conn?.received(bytes),
        drain: (socket) => socket.data.conn?.drain(),
        end: (socket) => socket.data.conn?.ended(),
        close(socket) {
          const conn = socket.data?.conn;
          if (!conn) return;
          connections.delete(conn);
          conn.closedBySocket();
        },
        error(socket) {
          const conn = socket.data?.conn;
          if (!conn) return;
          connections.delete(conn);
          conn.closedBySocket();
        },
      },
    });
  }
}

/** "EADDRINUSE: ...": the code first, as the kernel said it. */
function describeListenError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}

