/**
 * The loopback servers the public port hands connections over to
 * (handoff.ts): one for agents' and other nodes' WebSockets, dispatched by
 * kind (socket-kinds.ts), and one for the apex's app (the portal), which
 * listens from its first request on.
 */
import { MAX_MESSAGE, CHECK_PATH, CONNECT_PATH, NODE_PATH } from "../protocol/wire.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import type { EdgeContext } from "./agent-context.ts";
import { answerAgentCheck } from "./agent-check.ts";
import type { AgentSessions } from "./agent-sessions.ts";
import type { ApexApp } from "./edge-options.ts";
import { Loopback } from "./handoff.ts";
import type { NodeLinks } from "./other-nodes.ts";
import { landingPage } from "./pages.ts";
import { byKind, nodeSockets, sendResult, type SocketData } from "./socket-kinds.ts";

/** Bun queues at most this much per WebSocket before send() reports backpressure. */
const BACKPRESSURE_LIMIT = 4 * 1024 * 1024;
/** The largest request body the apex's app reads (its JSON bodies are 1 MiB at most, and it says so itself). */
const APEX_MAX_BODY = 2 * 1024 * 1024;

/**
 * Agents' and nodes' WebSockets, handed over by the public port; an agent's
 * place in `budget` is given back when it is not one. And agents' checks
 * (CHECK_PATH: agent-check.ts), plain requests whose JSON body Bun reads.
 */
export function socketsLoopback(p: { domain: string; edge: EdgeContext; agents: AgentSessions; budget: SocketBudget; links: NodeLinks | undefined }): Loopback<SocketData> {
  const { links, budget } = p;
  return new Loopback<SocketData>({
    fetch(req, server, visit) {
      const path = URL.parse(req.url)?.pathname;
      if (path === NODE_PATH && links && !visit.agent) {
        const nodeId = links.acceptNode(req);
        if (nodeId === undefined) return new Response("not a node of this cluster\n", { status: 401 });
        return server.upgrade(req, { data: { kind: "node", nodeId } }) ? undefined : new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      if (path === CONNECT_PATH && visit.agent) {
        if (server.upgrade(req, { data: { kind: "agent", remote: visit.peer, address: visit.client, counted: visit.client } })) return undefined;
        budget.release(visit.client);
        return new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      if (visit.agent) budget.release(visit.client);
      if (path === CHECK_PATH) return answerAgentCheck(req, visit.client, p.edge);
      return landingPage(p.domain);
    },
    websocket: {
      perMessageDeflate: false,
      // agents' frames are held to MAX_PAYLOAD by the frame decoder, which rejects before parsing
      maxPayloadLength: MAX_MESSAGE,
      backpressureLimit: BACKPRESSURE_LIMIT,
      idleTimeout: 0,
      sendPings: false,
      ...byKind({
        agent: p.agents.webSockets(p.edge, budget),
        node: nodeSockets((nodeId, ws) => {
          if (!links) throw new Error("a node's link on an edge that does not relay");
          return links.linked(nodeId, { send: (frames) => sendResult(ws.send(frames)), close: (reason) => ws.close(1000, reason) });
        }),
      }),
    },
  });
}

/**
 * The apex's connections (the portal's): plain requests, idle ones closed
 * as the public port's are. Its loopback server listens from the first
 * such request on, not before (a descriptor less while unused).
 */
export class ApexLoopback {
  private server?: Loopback<undefined>;
  private stopped = false;

  constructor(
    private readonly app: ApexApp | undefined,
    private readonly idleTimeoutS: number,
  ) {}

  /** Where the apex's requests go now; undefined with no app, or once stopped. */
  get(): Loopback<undefined> | undefined {
    const { app } = this;
    if (!app || this.stopped) return undefined;
    this.server ??= new Loopback<undefined>({
      fetch: (req, _server, visit) => app.fetch(req, { client: visit.client, proxied: visit.proxied === true }),
      idleTimeoutS: this.idleTimeoutS,
      maxRequestBodySize: APEX_MAX_BODY,
    });
    return this.server;
  }

  stop(force: boolean): Promise<void> | undefined {
    this.stopped = true;
    return this.server?.stop(force);
  }
}
