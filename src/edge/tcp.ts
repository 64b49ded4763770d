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
  /** A pool member carrying it: its connections in flight go down when it closes. */
  member?: Tunnel;
  /** The address that holds a place in the budget, until the socket closes. */
  counted?: string;
}

const overLimit = limitedLog(10);
const refusedByRules = limitedLog(10);

/**
 * A raw visitor connection (a tcp tunnel's, or a tls tunnel's after its
 * hello) taken to the tunnel's agent: the tunnel's IP rules and the budget
 * first (a refused connection is closed before it costs a stream), then a
 * stream of `kind` relayed with backpressure both ways. `counted`: the
 * address holding a place in the budget until the socket closes; `relay`:
 * none when the connection was closed (no agent, or no stream to be had).
 */
export function takeToAgent(socket: Socket<any>, t: Tunnel, budget: SocketBudget | undefined, kind: "tcp" | "tls"): { counted?: string; relay?: SocketRelay } {
  // a visitor that reset before open ran has no address any more, so no rule could admit it
  if (typeof socket.remoteAddress !== "string") {
    socket.terminate();
    return {};
  }
  const address = canonicalAddress(socket.remoteAddress);
  if (t.access?.refusesAddress(address)) {
    refusedByRules(`${kind} visitor refused by the tunnel's IP rules`, { client: address, ...(kind === "tcp" ? { port: socket.localPort } : { tunnel: t.subdomain }) });
    socket.terminate();
    return {};
  }
  if (budget && !budget.admit(address)) {
    overLimit(`${kind} visitor connection refused`, { client: address });
    socket.terminate();
    return {};
  }
  const stream = t.agent?.openStream({
    tunnel: t.id,
    kind,
    remote: `${socket.remoteAddress}:${socket.remotePort ?? 0}`,
    local: `${socket.localAddress}:${socket.localPort}`,
  });
  if (!stream) {
    socket.end(); // no agent (reconnecting) or it cannot take another stream
    return { counted: address };
  }
  return { counted: address, relay: new SocketRelay(socket, stream, { fromSocket: (n) => t.countIn(n), toSocket: (n) => t.countOut(n) }) };
}

/** `opened`: a connection became a stream to the agent (the metrics count it). */
export function tcpHandlers(tunnel: () => Tunnel, budget?: SocketBudget, opened?: () => void): SocketHandler<VisitorSocket> {
  const release = (socket: Socket<VisitorSocket>) => {
    if (socket.data?.counted === undefined) return;
    budget?.release(socket.data.counted);
    socket.data.counted = undefined;
  };
  return {
    open(socket: Socket<VisitorSocket>) {
      const t = tunnel();
      const { counted, relay } = takeToAgent(socket, t, budget, "tcp");
      socket.data = { counted, relay };
      if (relay) opened?.();
      if (relay && t.pool) {
        t.inFlight++;
        socket.data.member = t;
      }
    },
    data: (socket, data) => socket.data?.relay?.socketData(data),
    drain: (socket) => socket.data?.relay?.socketDrain(),
    end: (socket) => socket.data?.relay?.socketEnd(),
    close: (socket, error) => {
      release(socket);
      if (socket.data?.member) {
        socket.data.member.inFlight--;
        socket.data.member = undefined;
      }
      socket.data?.relay?.socketClosed(error);
    },
    error: (socket, error) => socket.data?.relay?.socketClosed(error ?? new Error("socket error")),
  };
}
