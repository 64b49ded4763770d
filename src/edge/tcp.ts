/**
 * Public TCP ports: one listener per tcp tunnel; each accepted connection
 * becomes a stream to the agent, relayed with backpressure both ways.
 */
import type { Socket, SocketHandler } from "bun";
import { SocketRelay } from "../relay/socket.ts";
import type { Tunnel } from "./registry.ts";

interface VisitorSocket {
  relay?: SocketRelay;
}

export function tcpHandlers(tunnel: () => Tunnel): SocketHandler<VisitorSocket> {
  return {
    open(socket: Socket<VisitorSocket>) {
      const t = tunnel();
      const stream = t.agent?.openStream({ tunnel: t.id, kind: "tcp", remote: `${socket.remoteAddress}:${socket.remotePort ?? 0}` });
      if (!stream) {
        socket.end(); // no agent (reconnecting) or it cannot take another stream
        return;
      }
      socket.data = {
        relay: new SocketRelay(socket, stream, { fromSocket: (n) => t.countIn(n), toSocket: (n) => t.countOut(n) }),
      };
    },
    data: (socket, data) => socket.data?.relay?.socketData(data),
    drain: (socket) => socket.data?.relay?.socketDrain(),
    end: (socket) => socket.data?.relay?.socketEnd(),
    close: (socket, error) => socket.data?.relay?.socketClosed(error),
    error: (socket, error) => socket.data?.relay?.socketClosed(error ?? new Error("socket error")),
  };
}
