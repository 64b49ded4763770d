/**
 * The agents connected to this edge, whichever way they came (the public
 * port's WebSocket or the direct port): who is here for the metrics, and
 * the one place an agent's connection ends (its session closes, its
 * traffic is written down). Also the WebSocket kind for agents.
 */
import type { ServerWebSocket } from "bun";
import type { EdgeContext } from "./agent-context.ts";
import { AgentConnection, type AgentSocketData } from "./agents.ts";
import type { TrafficMeter } from "./meter.ts";
import { sendResult, type SocketKind } from "./socket-kinds.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";

export class AgentSessions {
  private readonly all = new Set<AgentConnection>();

  constructor(private readonly meter: TrafficMeter) {}

  /** An agent connected (its handshake is still to come). */
  add(conn: AgentConnection): void {
    this.all.add(conn);
  }

  /** An agent's connection closed (WebSocket or direct): its session ends, its traffic is written down. */
  left(conn: AgentConnection): void {
    this.all.delete(conn);
    conn.closed();
    void this.meter.flush();
  }

  /** Agents past their handshake, by how they came. */
  readyCounts(): { websocket: number; direct: number } {
    const counts = { websocket: 0, direct: 0 };
    // an SSH session's tunnels are the SSH gateway's to count (ssh/): they are never added here
    for (const conn of this.all) if (conn.isReady && conn.transportKind !== "ssh") counts[conn.transportKind]++;
    return counts;
  }

  /** Tells every agent that understands it to connect again (DRAIN); returns how many were told. */
  drainAll(): number {
    let told = 0;
    for (const conn of this.all) if (conn.drain()) told++;
    return told;
  }

  refuseAll(code: string, message: string): void {
    for (const conn of this.all) conn.refuse(code, message);
  }

  /** Agents' WebSockets at /_burrow/connect: frames to their connection; the budget place given back on close. */
  webSockets(edge: EdgeContext, budget: SocketBudget): SocketKind<AgentSocketData> {
    return {
      open: (ws: ServerWebSocket<AgentSocketData>) => {
        const conn = new AgentConnection(
          {
            kind: "websocket",
            remote: ws.data.remote,
            address: ws.data.address,
            send: (frames) => sendResult(ws.send(frames)),
            close: (reason) => ws.close(1000, reason),
          },
          edge,
        );
        ws.data.conn = conn;
        this.add(conn);
      },
      message(ws, message) {
        const conn = ws.data.conn!;
        if (typeof message === "string") return conn.refuse("PROTOCOL_ERROR", "text messages are not part of the protocol");
        conn.mux.receive(message);
      },
      drain: (ws) => ws.data.conn?.mux.drained(),
      close: (ws) => {
        if (ws.data.counted !== undefined) budget.release(ws.data.counted);
        if (ws.data.conn) this.left(ws.data.conn);
      },
    };
  }
}
