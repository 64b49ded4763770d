/**
 * `burrow connect owner/name`, the connector's local side: a TCP port on
 * this machine (the owner's service port when it is free here, else any),
 * each connection to it carried as one stream through the server to the
 * private tunnel's agent and on to its service. The agent (client.ts, with
 * `connect`) holds the connection to the server, reconnecting as any agent
 * does; a local connection while it is away is closed at once.
 */
import { SocketRelay } from "../sockets/socket-stream.ts";
import { KINDS, type PrivateKind } from "../protocol/kinds.ts";
import type { Stream } from "../protocol/mux.ts";
import { runtime } from "../runtime/current.ts";
import type { Listening, RuntimeSocket, SocketHandlers } from "../runtime/types.ts";
import { listenForUdpConnector, onLocalPort } from "./connector-udp.ts";

export interface ConnectorPort {
  host: string;
  port: number;
  stop(): void;
}

interface LocalSocket {
  relay?: SocketRelay;
}

export interface ConnectorEvents {
  /** A local connection was carried (or could not be: `refused`). */
  connection(e: { remote: string; opened: boolean; closed?: boolean; bytesIn?: number; bytesOut?: number }): void;
}

/**
 * Listens on `host`:`port` (0: any), or on `preferred` when free and no port
 * was asked for; `open` gives each local connection its stream.
 */
export async function listenForConnector(opts: {
  host: string;
  port?: number;
  preferred?: number;
  open(remote: string): Stream | undefined;
  events?: ConnectorEvents;
}): Promise<ConnectorPort> {
  const handlers: SocketHandlers<LocalSocket | undefined> = {
    open(socket: RuntimeSocket<LocalSocket | undefined>) {
      const remote = `${socket.remoteAddress}:${socket.remotePort ?? 0}`;
      const stream = opts.open(remote);
      if (!stream) {
        opts.events?.connection({ remote, opened: false });
        socket.end();
        return;
      }
      let bytesIn = 0;
      let bytesOut = 0;
      socket.data = { relay: new SocketRelay(socket, stream, { fromSocket: (n) => (bytesIn += n), toSocket: (n) => (bytesOut += n) }) };
      stream.whenReset(() => opts.events?.connection({ remote, opened: true, closed: true, bytesIn, bytesOut }));
      opts.events?.connection({ remote, opened: true });
    },
    data: (socket, data) => socket.data?.relay?.socketData(data),
    drain: (socket) => socket.data?.relay?.socketDrain(),
    end: (socket) => socket.data?.relay?.socketEnd(),
    close: (socket, error) => socket.data?.relay?.socketClosed(error),
    error: (socket, error) => socket.data?.relay?.socketClosed(error),
  };
  const listen = (port: number): Promise<Listening> => runtime.listen({ hostname: opts.host, port, socket: handlers });
  const listener = await onLocalPort(listen, opts.port, opts.preferred);
  return { host: opts.host, port: listener.port, stop: () => listener.stop() };
}

/**
 * The local port for what the server says the connector reaches (READY's
 * `connect`): a UDP port for a udp tunnel, a TCP port for http and tcp;
 * `open` gives each local connection or sender its stream.
 */
export function openConnectorPort(
  reached: { protocol: PrivateKind; localPort?: number },
  opts: { host: string; port?: number; idleMs?: number; maxFlows?: number; open(remote: string, kind: "tcp" | "udp"): Stream | undefined; events?: ConnectorEvents },
): Promise<ConnectorPort> {
  const where = { host: opts.host, port: opts.port, preferred: reached.localPort };
  // a kind of datagrams is reached on a local UDP port, its flows "udp" streams; the others on a TCP port, "tcp" streams
  if (KINDS[reached.protocol].carries === "datagrams") return listenForUdpConnector({ ...where, idleMs: opts.idleMs, maxFlows: opts.maxFlows, open: (remote) => opts.open(remote, "udp") });
  return listenForConnector({ ...where, open: (remote) => opts.open(remote, "tcp"), events: opts.events });
}
