/**
 * A visitor's request on the public port, from its connection's place in
 * the budget to its route: the bare domain (landing page, the agents'
 * WebSocket), a tunnel's name (warning page, then the tunnel), or a 400 for
 * what cannot be read. Forwarded requests switch the idle timeout off until
 * their response ends.
 */
import type { Server } from "bun";
import type { TrustedProxies } from "../http/addresses.ts";
import { parseHost } from "../http/request-target.ts";
import { limitedLog } from "../log.ts";
import { HTTP_REQUEST, WEBSOCKET_REQUEST, type EdgeCounters } from "../metrics/edge-counters.ts";
import { CONNECT_PATH, NODE_PATH } from "../protocol/wire.ts";
import { forwardHttp, type ForwardContext } from "./http.ts";
import { badRequestPage, landingPage, overloadedPage, unknownTunnelPage } from "./pages.ts";
import type { Registry, Tunnel } from "./registry.ts";
import type { VisitorConnections } from "./visitor-connections.ts";
import { continueResponse, CONTINUE_PATH, interstitial } from "./warning.ts";
import type { SocketData } from "./socket-kinds.ts";
import { upgradeWebSocket, type VisitorSocketData } from "./websocket.ts";


/** Malformed requests are the sender's fault: logged at info, a few a minute. */
const clientFault = limitedLog(20);
/** Refusals for being over a connection cap: a few lines a minute, whatever the flood. */
export const overLimit = limitedLog(10);

/**
 * For this long after the edge starts, a visitor of a name held for an agent
 * of the server before (restart-holds.ts) waits for it, at most
 * MAX_VISITOR_WAIT_MS: after a restart, agents told DRAIN are back within a
 * fraction of a second.
 */
const STARTUP_WAIT_MS = 5_000;
const MAX_VISITOR_WAIT_MS = 2_000;

export interface VisitorDeps {
  domain: string;
  /** Visitors see https (the edge's TLS, or a proxy's). */
  secure: boolean;
  registry: Registry;
  connections: VisitorConnections;
  trustedProxies: TrustedProxies;
  idleTimeoutS: number;
  responseTimeoutMs: number;
  maxResponseTimeoutMs: number;
  startedAt: number;
  /** Names held at start for the agents of the server before. */
  heldAtStart: Set<string>;
  /** A place for an agent's connection from this address (false: over --max-agents-per-ip), given back by releaseAgent. */
  admitAgent(address: string): boolean;
  releaseAgent(address: string): void;
  /** Requests by kind and status class, and their time to response head (the metrics). */
  counters: EdgeCounters;
  /** Several nodes: a tunnel of another node, served through it (a page when it cannot be). */
  remote?(subdomain: string): Promise<Tunnel | Response | undefined>;
  /** Several nodes: the id of the node a relay link's request comes from, or undefined when it is not one. */
  acceptNode?(req: Request): string | undefined;
}

/** What fetch learns of a request's connection before routing it. */
interface Visit {
  /** The connection's key in the budget. */
  key: string;
  /** Who the visitor is (the peer, or the client a trusted proxy names). */
  client: string;
  /** The socket's peer, "address:port". */
  peer: string;
  /** Set when the connection's budget entry ends later than the response (a body, a WebSocket). */
  deferredEnd?: boolean;
  ended?: boolean;
  /** It became an agent's WebSocket: it leaves the visitors' budget. */
  notVisitor?: boolean;
  /** A WebSocket upgrade for a tunnel (the requests counter's protocol). */
  websocket?: boolean;
}

/** Whether the connection closes after this exchange (either side said so). */
const closes = (req: Request, res: Response | undefined) =>
  res?.headers.get("connection")?.toLowerCase() === "close" || req.headers.get("connection")?.toLowerCase() === "close";

const splitPeer = (peer: string): [string, number] => {
  const i = peer.lastIndexOf(":");
  return [peer.slice(0, i), Number(peer.slice(i + 1))];
};

export function visitorFetch(deps: VisitorDeps) {
  /** Every request starts here: first the connection budget, then the route. */
  async function fetch(req: Request, server: Server<SocketData>): Promise<Response | undefined> {
    const startedAt = performance.now();
    const peer = server.requestIP(req);
    if (!peer) return undefined; // the visitor is already gone
    const client = deps.trustedProxies.clientAddress(peer.address, req.headers.get("x-forwarded-for"));
    const admitted = deps.connections.begin(peer.address, peer.port, client);
    if (!admitted.ok) {
      overLimit("visitor connection refused", { client, limit: admitted.why === "address" ? "max-conns-per-ip" : "max-conns" });
      const refused = overloadedPage();
      deps.counters.request(HTTP_REQUEST, refused.status, startedAt);
      return refused;
    }
    const visit: Visit = { key: admitted.key, client, peer: `${peer.address}:${peer.port}` };
    let res: Response | undefined;
    try {
      res = await route(req, server, visit);
    } catch (err) {
      deps.connections.end(visit.key);
      deps.counters.request(visit.websocket ? WEBSOCKET_REQUEST : HTTP_REQUEST, 500, startedAt); // Bun's error handler answers 500
      throw err;
    }
    // an agent's connection is not a visitor's request; an upgraded visitor's is (101)
    if (!visit.notVisitor) deps.counters.request(visit.websocket ? WEBSOCKET_REQUEST : HTTP_REQUEST, res?.status ?? 101, startedAt);
    // forwarded requests end with their response body, upgrades with their WebSocket
    if (!visit.deferredEnd) deps.connections.end(visit.key, visit.notVisitor || closes(req, res));
    return res;
  }

  async function route(req: Request, server: Server<SocketData>, visit: Visit): Promise<Response | undefined> {
    const parsed = parseHost(req.headers.get("host"));
    const url = parsed && URL.parse(req.url);
    if (!parsed || !url) {
      clientFault("bad request refused", { why: parsed ? "request target" : "host header", remote: visit.client });
      return badRequestPage(parsed ? "The request target is not a valid path." : "The Host header does not name a valid host.");
    }
    const host = parsed.hostname;
    const hostHeader = parsed.port === undefined ? host : `${host}:${parsed.port}`;
    const name = host.endsWith(`.${deps.domain}`) ? host.slice(0, -deps.domain.length - 1) : undefined;

    if (name === undefined || name.includes(".")) {
      if (url.pathname === NODE_PATH && deps.acceptNode) {
        const nodeId = deps.acceptNode(req);
        if (nodeId === undefined) return new Response("not a node of this cluster\n", { status: 401 });
        const ok = server.upgrade(req, { data: { kind: "node", nodeId } });
        if (ok) visit.notVisitor = true;
        return ok ? undefined : new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      if (url.pathname === CONNECT_PATH) {
        // an agent is not a visitor: it counts against the agents' per-address cap instead
        if (!deps.admitAgent(visit.client)) return overloadedPage();
        const ok = server.upgrade(req, { data: { kind: "agent", remote: visit.peer, address: visit.client, counted: visit.client } });
        if (!ok) deps.releaseAgent(visit.client);
        else visit.notVisitor = true;
        return ok ? undefined : new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      return name === undefined ? landingPage(deps.domain) : unknownTunnelPage(hostHeader);
    }

    let tunnel = deps.registry.tunnelBySubdomain(name);
    // just after a restart, agents told DRAIN are on their way back: for a name held for one
    // of them, wait a moment for it rather than answer that its agent is away
    const startupLeft = deps.startedAt + STARTUP_WAIT_MS - Date.now();
    if (tunnel && !tunnel.agent && deps.heldAtStart.has(name) && startupLeft > 0) {
      tunnel = await deps.registry.whenSubdomain(name, Math.min(startupLeft, MAX_VISITOR_WAIT_MS));
    }
    if (!tunnel && deps.remote) {
      // not here: perhaps on another node, which serves it through a relay link
      const elsewhere = await deps.remote(name);
      if (elsewhere instanceof Response) return elsewhere;
      tunnel = elsewhere;
    }
    if (!tunnel) return unknownTunnelPage(hostHeader);
    // who may reach it comes first: IP rules, then sign-in (access/policy.ts); the warning only after
    const passed = tunnel.access && (await tunnel.access.admit(req, url, visit.client, hostHeader, deps.secure));
    if (passed instanceof Response) return passed;
    if (url.pathname === CONTINUE_PATH && req.method === "GET") return continueResponse(url, deps.secure);
    const warning = interstitial(req, url, tunnel, hostHeader);
    // another node's tunnel: its access rules are applied there, so the warning is shown there too, after them
    if (warning && !tunnel.relayed) return warning;
    const [remoteIp, remotePort] = splitPeer(visit.peer);
    visit.deferredEnd = true;
    const ctx: ForwardContext = {
      client: visit.client,
      remoteIp,
      remotePort,
      secure: deps.secure,
      host: hostHeader,
      responseTimeoutMs: deps.responseTimeoutMs,
      maxResponseTimeoutMs: deps.maxResponseTimeoutMs,
      connKey: visit.key,
      passed,
      warn: warning !== undefined,
      finished: () => {
        if (visit.ended) return;
        visit.ended = true;
        server.timeout(req, deps.idleTimeoutS);
        deps.connections.end(visit.key);
      },
    };
    // a request in flight (a long poll, an event stream, a big download) is never cut by the
    // idle timeout; it applies again from the end of the response (finished)
    server.timeout(req, 0);
    if ((req.headers.get("upgrade") ?? "").toLowerCase() === "websocket") {
      visit.websocket = true;
      const refused = await upgradeWebSocket(req, url, server as unknown as Server<VisitorSocketData>, tunnel, ctx);
      if (refused) ctx.finished?.(); // no upgrade: the connection goes back to keep-alive
      return refused;
    }
    return forwardHttp(req, url, tunnel, ctx);
  }

  return fetch;
}
