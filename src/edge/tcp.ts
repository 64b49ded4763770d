/**
 * Public TCP ports: one listener per tcp tunnel; each accepted connection
 * becomes a stream to the agent, relayed with backpressure both ways.
 */
import type { Socket, SocketHandler } from "bun";
import { canonicalAddress } from "../http/addresses.ts";
import { limitedLog } from "../log.ts";
import { SocketRelay } from "../sockets/socket-stream.ts";
import type { Tunnel } from "./registry.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";

interface VisitorSocket {
  relay?: SocketRelay;
  /** The address that holds a place in the budget, until the socket closes. */
  counted?: string;
}

const overLimit = limitedLog(10);
const refusedByRules = limitedLog(10);

/** `opened`: a connection became a stream to the agent (the metrics count it). */
export function tcpHandlers(tunnel: () => Tunnel, budget?: SocketBudget, opened?: () => void): SocketHandler<VisitorSocket> {
  const release = (socket: Socket<VisitorSocket>) => {
    if (socket.data?.counted === undefined) return;
    budget?.release(socket.data.counted);
    socket.data.counted = undefined;
  };
  return {
    open(socket: Socket<VisitorSocket>) {
      // a visitor that reset before open ran has no address any more, so no rule could admit it
      if (typeof socket.remoteAddress !== "string") {
        socket.terminate();
        return;
      }
      const address = canonicalAddress(socket.remoteAddress);
      // IP rules close the connection at accept, before it takes a place in the budget or a stream
      if (tunnel().access?.refusesAddress(address)) {
        refusedByRules("tcp visitor refused by the tunnel's IP rules", { client: address, port: socket.localPort });
        socket.terminate();
        return;
      }
      if (budget && !budget.admit(address)) {
        overLimit("tcp visitor connection refused", { client: address });
        socket.terminate();
        return;
      }
      socket.data = { counted: address };
      const t = tunnel();
      const stream = t.agent?.openStream({
        tunnel: t.id,
        kind: "tcp",
        remote: `${socket.remoteAddress}:${socket.remotePort ?? 0}`,
        local: `${socket.localAddress}:${socket.localPort}`,
      });
      if (!stream) {
        socket.end(); // no agent (reconnecting) or it cannot take another stream
        return;
      }
      socket.data.relay = new SocketRelay(socket, stream, { fromSocket: (n) => t.countIn(n), toSocket: (n) => t.countOut(n) });
      opened?.();
    },
    data: (socket, data) => socket.data?.relay?.socketData(data),
    drain: (socket) => socket.data?.relay?.socketDrain(),
    end: (socket) => socket.data?.relay?.socketEnd(),
    close: (socket, error) => {
      release(socket);
      socket.data?.relay?.socketClosed(error);
    },
    error: (socket, error) => socket.data?.relay?.socketClosed(error ?? new Error("socket error")),
  };
}
