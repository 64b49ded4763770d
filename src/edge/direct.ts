/**
 * The edge's direct port (--agent-port): agents that were sent MOVE connect
 * here and speak the same frames as over the WebSocket, back to back on a
 * plain TCP socket (TLS when the edge has a certificate). No WebSocket
 * framing or masking between the two event loops: this is the fast path
 * for bulk bytes. Everything past the bytes is AgentConnection's, as for a
 * WebSocket.
 */
import type { Socket, TCPSocketListener } from "bun";
import { canonicalAddress } from "../http/addresses.ts";
import { FrameReader } from "../protocol/frame-reader.ts";
import { ProtocolError } from "../protocol/frames.ts";
import { SocketSender } from "../sockets/socket-sender.ts";
import { WireError } from "../protocol/wire.ts";
import { strangerFault, type AgentTransport, type EdgeContext } from "./agent-context.ts";
import { AgentConnection } from "./agents.ts";
import { log } from "../log.ts";
import type { TlsSource } from "../tls/tls-source.ts";

interface DirectSocketData {
  conn?: AgentConnection;
  reader?: FrameReader;
  sender?: SocketSender;
  /** The address holding a place in the connection budget until the socket closes. */
  counted?: string;
}

/**
 * Whether the direct port opens. Behind a proxy that adds TLS (an https
 * public URL without a certificate of the edge's own) the edge speaks plain
 * TCP: a direct port would carry agents' traffic unencrypted where their
 * WebSocket was not, so there is none.
 */
export function directPortAllowed(opts: { agentPort?: number; tls?: unknown; publicUrl?: { scheme: "http" | "https" } }): boolean {
  const secure = (opts.publicUrl?.scheme ?? (opts.tls ? "https" : "http")) === "https";
  return opts.agentPort !== undefined && (Boolean(opts.tls) || !secure);
}

export interface DirectPortHooks {
  opened(conn: AgentConnection): void;
  closed(conn: AgentConnection): void;
  /** A connection from `address` arrives: false closes it at once (over a cap, or descriptors short). */
  admit?(address: string): boolean;
  /** A connection admit() let in has closed. */
  released?(address: string): void;
}

export interface DirectListener {
  port: number;
  /** Whether it accepts agents now (false once stopped, or if new certificates could not be listened with). */
  readonly listening: boolean;
  /** Stops accepting; with `closeActive`, cuts the agents' connections too. */
  stop(closeActive: boolean): void;
}

/**
 * The direct port. With a TlsSource whose certificates change (ACME), a new
 * listener with them takes the port, and the old one's connections live on.
 */
export function listenDirect(
  opts: { host: string; port: number; tls?: TlsSource },
  edge: EdgeContext,
  hooks: DirectPortHooks,
): DirectListener {
  const all = new Set<TCPSocketListener<DirectSocketData>>();
  let accepting: TCPSocketListener<DirectSocketData> | undefined = listenOnce(opts, opts.port, edge, hooks);
  all.add(accepting);
  const port = accepting.port;
  const unsubscribe = opts.tls?.onChange(() => {
    if (!accepting) return;
    accepting.stop(false);
    all.delete(accepting);
    try {
      accepting = listenOnce(opts, port, edge, hooks);
      all.add(accepting);
    } catch (err) {
      accepting = undefined;
      log.error("direct port could not take new certificates", { port, err: String(err) });
    }
  });
  return {
    port,
    get listening() {
      return accepting !== undefined;
    },
    stop(closeActive) {
      unsubscribe?.();
      accepting = undefined;
      for (const l of all) l.stop(closeActive);
    },
  };
}

function listenOnce(
  opts: { host: string; tls?: TlsSource },
  port: number,
  edge: EdgeContext,
  hooks: DirectPortHooks,
): TCPSocketListener<DirectSocketData> {
  return Bun.listen<DirectSocketData>({
    hostname: opts.host,
    port,
    exclusive: true, // a second server on this port must fail, not share the agents
    ...(opts.tls ? { tls: opts.tls.primary() } : {}),
    socket: {
      open(socket) {
        // set first: every other handler reads it, and a peer may be gone before open is done
        socket.data = {};
        // a peer that reset before open ran has no address any more: nothing to serve, nothing to count
        if (typeof socket.remoteAddress !== "string") {
          socket.terminate();
          return;
        }
        const address = canonicalAddress(socket.remoteAddress);
        if (hooks.admit && !hooks.admit(address)) {
          socket.terminate();
          return;
        }
        socket.setNoDelay(true);
        const sender = new SocketSender(socket as Socket<unknown>);
        const transport: AgentTransport = {
          kind: "direct",
          remote: `${socket.remoteAddress}:${(socket as { remotePort?: number }).remotePort ?? 0}`,
          // no proxy speaks for anyone on this port: the peer is the client
          address,
          send: (frames) => sender.send(frames),
          close: () => sender.end(),
        };
        const conn = new AgentConnection(transport, edge);
        const reader = new FrameReader(
          (frames) => conn.mux.receive(frames),
          (piece) => conn.mux.receiveFrame(piece),
        );
        socket.data = { conn, sender, counted: address, reader };
        hooks.opened(conn);
      },
      data(socket, chunk) {
        const { conn, reader } = socket.data ?? {};
        if (!conn || !reader || conn.mux.closed) return;
        try {
          reader.push(chunk);
        } catch (err) {
          if (!(err instanceof ProtocolError)) throw err;
          conn.refuse(WireError.PROTOCOL_ERROR, err.message);
        }
      },
      drain(socket) {
        const { conn, sender } = socket.data ?? {};
        if (sender?.flush()) conn?.mux.drained();
      },
      close(socket) {
        const data = socket.data;
        if (!data) return;
        const { conn, counted } = data;
        if (counted !== undefined) hooks.released?.(counted);
        data.counted = undefined;
        if (!conn) return;
        data.conn = undefined;
        hooks.closed(conn);
      },
      error(socket, err) {
        strangerFault("agent socket error", { session: socket.data?.conn?.sessionId, err: err.message });
      },
    },
  });
}
