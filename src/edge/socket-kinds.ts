/**
 * The edge's own WebSockets (served on loopback, handoff.ts) are of two
 * kinds, told apart by the data the upgrade gave them: an agent's
 * (agent-sessions.ts) and another node's relay link (other-nodes.ts). Bun
 * has one handler for all; this dispatches each event to its kind's, so
 * each kind is written once, in its own place.
 */
import type { ServerWebSocket, WebSocketHandler } from "bun";
import type { SendResult } from "../protocol/mux.ts";
import type { AgentSocketData } from "./agents.ts";
import type { NodeLink } from "./other-nodes.ts";

/** Another node's relay link. */
export interface NodeSocketData {
  kind: "node";
  nodeId: string;
  link?: NodeLink;
}

export type SocketData = AgentSocketData | NodeSocketData;

/** One kind's handlers. */
export interface SocketKind<D> {
  open(ws: ServerWebSocket<D>): void;
  message(ws: ServerWebSocket<D>, message: string | Buffer): void;
  drain(ws: ServerWebSocket<D>): void;
  close(ws: ServerWebSocket<D>, code: number, reason: string): void;
}

export type SocketKinds = { [K in SocketData["kind"]]: SocketKind<Extract<SocketData, { kind: K }>> };

type Events = Pick<WebSocketHandler<SocketData>, "open" | "message" | "drain" | "close">;

export function byKind(kinds: SocketKinds): Required<Events> {
  const of = (ws: ServerWebSocket<SocketData>) => kinds[ws.data.kind] as SocketKind<SocketData>;
  return {
    open: (ws) => of(ws).open(ws),
    message: (ws, message) => of(ws).message(ws, message),
    drain: (ws) => of(ws).drain(ws),
    close: (ws, code, reason) => of(ws).close(ws, code, reason),
  };
}

/** Bun's ServerWebSocket.send answer as the mux reads it: -1 queued past the limit, 0 dropped. */
export const sendResult = (r: number): SendResult => (r === -1 ? "backpressure" : r === 0 ? "closed" : "sent");

/** Another node's relay link on this edge: its frames go to what the other nodes' relay made of it. */
export function nodeSockets(linked: (nodeId: string, ws: ServerWebSocket<NodeSocketData>) => NodeLink): SocketKind<NodeSocketData> {
  return {
    open: (ws) => void (ws.data.link = linked(ws.data.nodeId, ws)),
    message(ws, message) {
      if (typeof message !== "string") ws.data.link?.receive(message);
    },
    drain: (ws) => ws.data.link?.drained(),
    close: (ws) => ws.data.link?.closed(),
  };
}
