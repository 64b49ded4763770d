/**
 * The edge's own WebSockets (agents' connections on CONNECT_PATH, other
 * nodes' relay links on NODE_PATH) are served by a Bun.serve on loopback,
 * whose native WebSocket framing is what those long-lived, busy connections
 * want. The public port reads the upgrade's head itself (http-connection.ts)
 * and, for these two paths, hands the connection over: it connects to the
 * loopback server, replays the head, and pipes both ways from then on.
 *
 * The loopback server sees its peer as 127.0.0.1 and the port of the
 * edge's connection to it; the visitor's real address and what the public
 * port judged of it are looked up by that port (visitOf).
 */
import type { Server, ServerWebSocket, Socket, WebSocketHandler } from "bun";
import { log } from "../log.ts";
import { PendingWrites } from "../sockets/pending-writes.ts";
import type { HttpConnection, Occupant } from "./http-connection.ts";

/** What the public port knew of a handed-over connection. */
export interface HandedOver {
  /** The visitor's socket peer, "address:port". */
  peer: string;
  /** Who it is (a trusted proxy's client, or the peer's address). */
  client: string;
  /** An agent's connection (CONNECT_PATH), holding a place under --max-agents-per-ip; else another node's (or the apex's). */
  agent: boolean;
  /** The peer is a trusted proxy, which may send requests for any name on one connection. */
  proxied?: boolean;
}

export interface LoopbackOptions<T> {
  fetch(req: Request, server: Server<T>, visit: HandedOver): Response | undefined | Promise<Response | undefined>;
  /** None for a server of plain requests (the portal's). */
  websocket?: WebSocketHandler<T>;
  /** Seconds an idle connection stays; default none (the agents' and nodes' WebSockets, whose peers the mux's keepalive watches). */
  idleTimeoutS?: number;
  /** Bytes a request's body may have (Bun's default otherwise). */
  maxRequestBodySize?: number;
  /** A hand-over that could not reach the loopback server (it is stopping). */
  lost?(visit: HandedOver): void;
}

interface PipeData {
  pipe?: Pipe;
}

export class Loopback<T> {
  private readonly server: Server<T>;
  private readonly visits = new Map<number, HandedOver>();

  constructor(opts: LoopbackOptions<T>) {
    const visits = this.visits;
    this.server = Bun.serve<T>({
      hostname: "127.0.0.1",
      port: 0,
      // the agents' and nodes' WebSockets have none: a dead peer is found by the mux's keepalive
      idleTimeout: opts.idleTimeoutS ?? 0,
      ...(opts.maxRequestBodySize !== undefined ? { maxRequestBodySize: opts.maxRequestBodySize } : {}),
      fetch(req, server) {
        const port = server.requestIP(req)?.port;
        const visit = port === undefined ? undefined : visits.get(port);
        if (!visit) return new Response("not a connection of this edge\n", { status: 400 });
        return opts.fetch(req, server, visit);
      },
      error(err) {
        log.error("edge request failed", { err: String(err) });
        return new Response("internal error\n", { status: 500 });
      },
      ...(opts.websocket ? { websocket: opts.websocket } : {}),
    } as Parameters<typeof Bun.serve<T>>[0]);
  }

  /** Hands `conn` over to the loopback server: `head` (the request head, blank line included) goes first. */
  handOver(conn: HttpConnection, head: string, visit: HandedOver, lost: () => void): void {
    const pipe = new Pipe(conn, this.visits, visit, lost);
    conn.handedOver = true;
    conn.occupy(pipe);
    void Bun.connect<PipeData>({
      hostname: "127.0.0.1",
      port: this.server.port!,
      data: {},
      socket: {
        open(socket) {
          socket.data = { pipe };
          pipe.opened(socket, Buffer.from(head, "latin1"));
        },
        data: (socket, bytes) => socket.data.pipe?.fromLoopback(bytes),
        drain: (socket) => socket.data.pipe?.loopbackDrained(),
        close: (socket) => socket.data.pipe?.loopbackClosed(),
        error: (socket) => socket.data.pipe?.loopbackClosed(),
        connectError: () => pipe.loopbackClosed(),
      },
    }).catch(() => pipe.loopbackClosed());
  }

  /** Connections upgraded on the loopback server (agents' and nodes'). */
  get pendingWebSockets(): number {
    return this.server.pendingWebSockets;
  }

  async stop(force: boolean): Promise<void> {
    await this.server.stop(force);
  }
}

/** The public connection and its loopback twin, bytes both ways with backpressure both ways. */
class Pipe implements Occupant {
  private socket: Socket<PipeData> | undefined;
  private out: PendingWrites | undefined;
  /** Visitor bytes that came before the loopback connection opened. */
  private early: Uint8Array[] = [];
  private port = 0;
  private done = false;

  constructor(
    private readonly conn: HttpConnection,
    private readonly visits: Map<number, HandedOver>,
    private readonly visit: HandedOver,
    private readonly lost: () => void,
  ) {}

  opened(socket: Socket<PipeData>, head: Uint8Array): void {
    if (this.done) return void socket.terminate();
    this.socket = socket;
    this.out = new PendingWrites(socket);
    this.port = socket.localPort;
    this.visits.set(this.port, this.visit);
    this.out.write(head);
    const rest = this.conn.takeEarly();
    for (const piece of [...this.early, ...(rest ? [rest] : [])]) this.out.write(piece, true);
    this.early = [];
  }

  // the visitor's side (Occupant)

  data(bytes: Uint8Array): void {
    if (!this.out) return void this.early.push(bytes.slice());
    if (!this.out.write(bytes, true)) this.conn.pause();
  }

  drained(): void {
    this.socket?.resume();
  }

  ended(): void {
    this.close();
  }

  closed(): void {
    this.close();
  }

  // the loopback side

  fromLoopback(bytes: Uint8Array): void {
    if (!this.conn.write(bytes)) this.socket?.pause();
  }

  loopbackDrained(): void {
    if (this.out?.flush()) this.conn.resume();
  }

  loopbackClosed(): void {
    if (this.port === 0) this.lost(); // never reached the loopback server
    this.close();
  }

  private close(): void {
    if (this.done) return;
    this.done = true;
    if (this.port) this.visits.delete(this.port);
    this.socket?.end();
    this.conn.close();
  }
}
