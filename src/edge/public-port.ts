/**
 * The public port: a Bun.listen (sockets/tls-front.ts, which terminates
 * TLS by server name) whose connections are read as HTTP/1.1 by
 * http-connection.ts. It can stop accepting for a while and start again:
 * under descriptor pressure the listening socket itself is closed (the
 * connections already open go on being served) and the port is taken again
 * once pressure is over; new visitors meanwhile see a refused connection,
 * which costs the server nothing.
 */
import type { Socket } from "bun";
import { TlsFront, type TlsFrontOptions } from "../sockets/tls-front.ts";
import type { TlsSource } from "../tls/tls-source.ts";
import { MAX_REQUEST_FIELDS } from "../http/request-head.ts";
import { HttpConnection, MAX_READ_AHEAD_BYTES, MAX_REQUEST_HEAD_BYTES, type ConnectionServer, type HeadLimits, type SocketData } from "./http-connection.ts";

/** How long, at a forced stop, a handed-over connection may take to pass on its last bytes. */
const HANDED_OVER_GRACE_MS = 1_000;

export interface PublicPortOptions {
  hostname: string;
  port: number;
  /** Certificates, by server name (sockets/tls-front.ts decrypts); none: plain HTTP. */
  tls?: TlsSource;
  server: ConnectionServer;
  idleTimeoutS: number;
  /** A request head's bytes and header fields at most (--max-request-head, --max-request-fields). */
  maxHeadBytes?: number;
  maxFields?: number;
  maxReadAheadBytes?: number;
  /** How long a TLS visitor has to send its ClientHello (--tls-hello-timeout). */
  helloTimeoutMs?: number;
  /**
   * HTTP/2 (the server's http2 takes those connections): with TLS, offered
   * by ALPN beside http/1.1 to the server names `alpn` says yes to (--h2);
   * without, taken from a client that starts with its preface (--h2-prior-knowledge).
   */
  http2?: { alpn?(serverName: string | undefined): boolean; priorKnowledge?: boolean };
  /** With TLS: a connection the hello's name routes elsewhere, undecrypted (a tls tunnel's). */
  route?: TlsFrontOptions<SocketData>["route"];
  /**
   * Asked as each connection opens, with how many are open already: false
   * closes it at once, before it holds a descriptor any longer (over
   * --max-conns, or descriptors short). Connections that never send a
   * request count too: they hold a descriptor all the same.
   */
  admit?(open: number): boolean;
}

export class PublicPort {
  private readonly front: TlsFront<SocketData>;
  private readonly connections = new Set<HttpConnection>();
  readonly port: number;

  constructor(options: PublicPortOptions) {
    const { server, idleTimeoutS } = options;
    const limits: HeadLimits = {
      idleTimeoutMs: idleTimeoutS * 1000,
      maxHeadBytes: options.maxHeadBytes ?? MAX_REQUEST_HEAD_BYTES,
      maxFields: options.maxFields ?? MAX_REQUEST_FIELDS,
      maxReadAheadBytes: options.maxReadAheadBytes ?? MAX_READ_AHEAD_BYTES,
      // prior knowledge is for plain HTTP; over TLS a client says h2 by ALPN
      priorKnowledge: !options.tls && (options.http2?.priorKnowledge ?? false),
    };
    const alpn = options.tls ? options.http2?.alpn : undefined;
    const connections = this.connections;
    const peerOf = (socket: Socket<SocketData>) => this.front.peerOf(socket);
    const gone = (socket: Socket<SocketData>) => {
      const conn = socket.data?.conn;
      if (!conn) return;
      connections.delete(conn);
      conn.closedBySocket();
    };
    this.front = new TlsFront<SocketData>({
      hostname: options.hostname,
      port: options.port,
      tls: options.tls,
      helloTimeoutMs: options.helloTimeoutMs,
      // only with TLS: a plain port has no hello to route by
      route: options.tls ? options.route : undefined,
      h2: alpn,
      allowHalfOpen: true, // a visitor that half-closes after its request still gets the answer
      socket: {
        open(socket) {
          socket.data = {};
          // a visitor that reset before open ran has no address any more
          if (typeof socket.remoteAddress !== "string") return void socket.terminate();
          if (options.admit && !options.admit(connections.size)) return void socket.terminate();
          socket.setNoDelay(true);
          const conn = new HttpConnection(socket, peerOf(socket), server, limits);
          socket.data = { conn };
          connections.add(conn);
          // a TLS socket opens after its handshake: the protocol ALPN chose is known
          if (alpn && socket.alpnProtocol === "h2") server.http2?.(conn, []);
        },
        data: (socket, bytes) => socket.data.conn?.received(bytes),
        drain: (socket) => socket.data.conn?.drain(),
        end: (socket) => socket.data.conn?.ended(),
        close: gone,
        error: gone,
      },
    });
    this.port = this.front.port;
  }

  get paused(): boolean {
    return this.front.paused;
  }

  /** Why the last try to listen again failed; undefined after one that worked. */
  get listenError(): string | undefined {
    return this.front.listenError;
  }

  pause(): void {
    this.front.pause();
  }

  /** Listens again on the same port; false (and still paused) if the port cannot be had. */
  resume(): boolean {
    return this.front.resume();
  }

  /** Closes every connection that has no request in flight, and asks HTTP/2 ones to end once theirs are done; returns how many closed. */
  closeIdle(): number {
    let n = 0;
    for (const c of this.connections) if (c.closeIfIdle()) n++;
    return n;
  }

  /** Connections open now. */
  get openConnections(): number {
    return this.connections.size;
  }

  /** Connections with a visitor's request in flight (not the agents' and nodes' WebSockets handed over). */
  get pendingRequests(): number {
    let n = 0;
    for (const c of this.connections) if (c.busy && !c.handedOver) n++;
    return n;
  }

  /**
   * Stops accepting; with `force`, cuts every connection too. Resolves when
   * all are closed. Connections handed over to the loopback server are given
   * up to HANDED_OVER_GRACE_MS to pass on what it said last (an agent's
   * SERVER_SHUTDOWN) and close with it.
   */
  async stop(force: boolean): Promise<void> {
    if (force) {
      for (const c of this.connections) if (!c.handedOver) c.terminate();
      const until = performance.now() + HANDED_OVER_GRACE_MS;
      while ([...this.connections].some((c) => c.handedOver) && performance.now() < until) await Bun.sleep(10);
      for (const c of this.connections) c.terminate();
    }
    await this.front.stop(force);
  }
}
