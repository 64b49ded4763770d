/**
 * The public face: one Bun.serve on --http-port. Requests for
 * <name>.<domain> go to tunnel <name>; on any other host, /_burrow/connect
 * is where agents connect. Agents that can are moved to the direct port
 * (--agent-port, direct.ts). TCP tunnels listen on their own ports (ports.ts).
 */
import type { Server, ServerWebSocket } from "bun";
import type { Core } from "../core/index.ts";
import type { TrustedProxies } from "../http/addresses.ts";
import { parseHost } from "../http/request-target.ts";
import { limitedLog, log } from "../log.ts";
import { CONNECT_PATH, DEAD_AFTER_MS, MAX_MESSAGE } from "../protocol/wire.ts";
import { MAX_WS_MESSAGE } from "../protocol/ws-records.ts";
import { AgentConnection, type AgentSocketData, type EdgeContext } from "./agents.ts";
import { listenDirect } from "./direct.ts";
import { HandshakeGuard } from "./handshake-guard.ts";
import { forwardHttp, type ForwardContext } from "./http.ts";
import { FLUSH_INTERVAL_MS, TrafficMeter } from "./meter.ts";
import { DescriptorWatch, openFileLimit } from "./descriptors.ts";
import { badRequestPage, landingPage, overloadedPage, unknownTunnelPage } from "./pages.ts";
import { PublicListener } from "./public-listener.ts";
import { takeHolds, writeHolds } from "./restart-holds.ts";
import { SocketBudget } from "./socket-budget.ts";
import { VisitorConnections } from "./visitor-connections.ts";
import { PortAllocator } from "./ports.ts";
import { enforceQuotas } from "./quota.ts";
import { Registry } from "./registry.ts";
import { continueResponse, CONTINUE_PATH, interstitial } from "./warning.ts";
import { upgradeWebSocket, visitorSocket, type VisitorSocketData } from "./websocket.ts";

export interface EdgeOptions {
  core: Core;
  domain: string;
  host: string;
  port: number;
  tcpPorts: { first: number; last: number };
  tls?: { cert: string; key: string };
  responseTimeoutMs: number;
  /** Scheme and port visitors use, when a proxy in front differs from what the edge listens on. */
  publicUrl?: { scheme: "http" | "https"; port: number };
  /** The direct port for agents (0: any free one); undefined: agents stay on the WebSocket. */
  agentPort?: number;
  /** Seconds an idle keep-alive visitor connection stays open (requests in flight are never cut). */
  idleTimeoutS: number;
  /** Concurrent connections one client address may hold on the public listeners. */
  maxConnsPerIp: number;
  /** Concurrent visitor connections in all; undefined: from the open-file limit. */
  maxConns?: number;
  /** Proxies whose X-Forwarded-For is believed. */
  trustedProxies: TrustedProxies;
  /** Failed handshakes a client address may make a minute before RATE_LIMITED. */
  handshakeLimit: number;
  /** On shutdown, how long visitor requests in flight may take to finish. */
  drainTimeoutMs: number;
  /** Where live names are written on shutdown and read at start, to keep them across a restart. */
  holdsFile?: string;
}

type SocketData = AgentSocketData | VisitorSocketData;

/** Malformed requests are the sender's fault: logged at info, a few a minute. */
const clientFault = limitedLog(20);
/** Refusals for being over a connection cap: a few lines a minute, whatever the flood. */
const overLimit = limitedLog(10);

const SWEEP_INTERVAL_MS = 5_000;
/**
 * For this long after the edge starts, a visitor asking for a name no agent
 * holds yet waits for it (at most MAX_VISITOR_WAIT_MS) instead of a 404:
 * after a restart, agents told DRAIN are back within a fraction of a second.
 */
const STARTUP_WAIT_MS = 5_000;
const MAX_VISITOR_WAIT_MS = 2_000;
/** While draining, how often the edge looks whether requests are still in flight. */
const DRAIN_POLL_MS = 50;
/** Bun queues at most this much per WebSocket before send() reports backpressure. */
const BACKPRESSURE_LIMIT = 4 * 1024 * 1024;

export interface RunningEdge {
  /** The port the edge listens on. */
  port: number;
  /** The direct port agents are moved to, when there is one. */
  agentPort?: number;
  /** Where visitors and agents reach it, e.g. https://tunnels.example.com */
  publicUrl: string;
  registry: Registry;
  stop(): Promise<void>;
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
}

/** Connections left for visitors when --max-conns is auto: half of what the file limit leaves after a reserve. */
export function defaultMaxConns(fdLimit: number | undefined): number {
  if (fdLimit === undefined) return 10_000;
  return Math.max(64, Math.floor((Math.min(fdLimit, 10_000_000) - 256) / 2));
}

function logDescriptorBudget(fdLimit: number | undefined, maxConns: number, perIp: number): void {
  const fields = { open_files: fdLimit ?? "unknown", max_conns: maxConns, max_conns_per_ip: perIp };
  if (fdLimit !== undefined && fdLimit < 4096) {
    log.warn("the open-file limit is low for a public server: raise it (systemd: LimitNOFILE=65536)", fields);
  } else log.info("connection budget", fields);
}

/** Whether the connection closes after this exchange (either side said so). */
const closes = (req: Request, res: Response | undefined) =>
  res?.headers.get("connection")?.toLowerCase() === "close" || req.headers.get("connection")?.toLowerCase() === "close";

const splitPeer = (peer: string): [string, number] => {
  const i = peer.lastIndexOf(":");
  return [peer.slice(0, i), Number(peer.slice(i + 1))];
};

export function startEdge(opts: EdgeOptions): RunningEdge {
  const { core, domain } = opts;
  const fdLimit = openFileLimit();
  const startedAt = Date.now();
  /** Names the server before us (same data dir) had live when it stopped; held for their tokens. */
  const heldAtStart = new Set<string>();
  const meter = new TrafficMeter(core);
  const registry = new Registry(meter);
  core.attachLiveTunnels(registry);
  const maxConns = opts.maxConns ?? defaultMaxConns(fdLimit);
  // TCP tunnels' visitors share the total with the public HTTP port's; agents' direct
  // connections have only the per-address cap (a team behind one NAT is many agents)
  const tcpVisitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: maxConns }, () => connections.total, () => watch.pressed);
  const agentSockets = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: Number.MAX_SAFE_INTEGER }, undefined, () => watch.pressed);
  const ports = new PortAllocator(opts.tcpPorts, opts.host, registry, tcpVisitors);
  if (opts.holdsFile) {
    for (const h of takeHolds(opts.holdsFile)) {
      registry.hold(registry.newTunnel("http", { subdomain: h.subdomain }, h, h.skipWarning));
      heldAtStart.add(h.subdomain);
    }
    if (heldAtStart.size > 0) log.info("holding names for the agents of the server before", { names: heldAtStart.size });
  }
  const agents = new Set<AgentConnection>();
  /** An agent's connection closed (WebSocket or direct): its session ends, its traffic is written down. */
  const agentLeft = (conn: AgentConnection) => {
    agents.delete(conn);
    conn.closed();
    meter.flush();
  };
  // what visitors see: the edge's own TLS and port, unless a proxy in front says otherwise
  const scheme = opts.publicUrl?.scheme ?? (opts.tls ? "https" : "http");
  const secure = scheme === "https";
  let publicPort = opts.publicUrl?.port ?? opts.port;

  const portSuffix = () => (publicPort === (secure ? 443 : 80) ? "" : `:${publicPort}`);
  // Behind a proxy that adds TLS the edge itself speaks plain TCP: a direct port would carry
  // agents' traffic unencrypted where their WebSocket was not, so there is none.
  const directAllowed = opts.agentPort !== undefined && (Boolean(opts.tls) || !secure);
  if (opts.agentPort !== undefined && !directAllowed) {
    log.info("no direct agent port: the edge has no certificate of its own behind an https --public-url");
  }
  let direct: ReturnType<typeof listenDirect> | undefined;
  const edge: EdgeContext = {
    core,
    registry,
    ports,
    httpUrl: (sub) => `${scheme}://${sub}.${domain}${portSuffix()}`,
    tcpAddress: (port) => `${domain}:${port}`,
    directPort: () => direct?.port,
    handshakes: new HandshakeGuard(opts.handshakeLimit, () => core.clock.now().getTime()),
  };

  const connections = new VisitorConnections(
    { perAddress: opts.maxConnsPerIp, total: maxConns, idleTimeoutS: opts.idleTimeoutS },
    () => listener.port,
    () => tcpVisitors.total,
  );

  /** Every request starts here: first the connection budget, then the route. */
  async function fetch(req: Request, server: Server<SocketData>): Promise<Response | undefined> {
    const peer = server.requestIP(req);
    if (!peer) return undefined; // the visitor is already gone
    const client = opts.trustedProxies.clientAddress(peer.address, req.headers.get("x-forwarded-for"));
    const admitted = connections.begin(peer.address, peer.port, client);
    if (!admitted.ok) {
      overLimit("visitor connection refused", { client, limit: admitted.why === "address" ? "max-conns-per-ip" : "max-conns" });
      return overloadedPage();
    }
    const visit: Visit = { key: admitted.key, client, peer: `${peer.address}:${peer.port}` };
    let res: Response | undefined;
    try {
      res = await route(req, server, visit);
    } catch (err) {
      connections.end(visit.key);
      throw err;
    }
    // forwarded requests end with their response body, upgrades with their WebSocket
    if (!visit.deferredEnd) connections.end(visit.key, closes(req, res));
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
    const name = host.endsWith(`.${domain}`) ? host.slice(0, -domain.length - 1) : undefined;

    if (name === undefined || name.includes(".")) {
      if (url.pathname === CONNECT_PATH) {
        const ok = server.upgrade(req, { data: { kind: "agent", remote: visit.peer, address: visit.client, connKey: visit.key } });
        if (ok) visit.deferredEnd = true;
        return ok ? undefined : new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      return name === undefined ? landingPage(domain) : unknownTunnelPage(hostHeader);
    }

    let tunnel = registry.tunnelBySubdomain(name);
    // just after a restart, agents told DRAIN are on their way back: for a name held for one
    // of them, wait a moment for it rather than answer that its agent is away
    const startupLeft = startedAt + STARTUP_WAIT_MS - Date.now();
    if (tunnel && !tunnel.agent && heldAtStart.has(name) && startupLeft > 0) {
      tunnel = await registry.whenSubdomain(name, Math.min(startupLeft, MAX_VISITOR_WAIT_MS));
    }
    if (!tunnel) return unknownTunnelPage(hostHeader);
    if (url.pathname === CONTINUE_PATH && req.method === "GET") return continueResponse(url, secure);
    const warning = interstitial(req, url, tunnel, hostHeader);
    if (warning) return warning;
    const [remoteIp, remotePort] = splitPeer(visit.peer);
    visit.deferredEnd = true;
    const ctx: ForwardContext = {
      remoteIp,
      remotePort,
      secure,
      host: hostHeader,
      responseTimeoutMs: opts.responseTimeoutMs,
      connKey: visit.key,
      finished: () => {
        if (visit.ended) return;
        visit.ended = true;
        server.timeout(req, opts.idleTimeoutS);
        connections.end(visit.key);
      },
    };
    // a request in flight (a long poll, an event stream, a big download) is never cut by the
    // idle timeout; it applies again from the end of the response (finished)
    server.timeout(req, 0);
    if ((req.headers.get("upgrade") ?? "").toLowerCase() === "websocket") {
      const refused = await upgradeWebSocket(req, url, server as unknown as Server<VisitorSocketData>, tunnel, ctx);
      if (refused) ctx.finished?.(); // no upgrade: the connection goes back to keep-alive
      return refused;
    }
    return forwardHttp(req, url, tunnel, ctx);
  }

  const listener = new PublicListener<SocketData>({
    hostname: opts.host,
    port: opts.port,
    ...(opts.tls ? { tls: { cert: Bun.file(opts.tls.cert), key: Bun.file(opts.tls.key) } } : {}),
    // idle keep-alive connections close after this; requests in flight switch it off (fetch above).
    // Agents' WebSockets have their own (none: dead agents are found by keepalive).
    idleTimeout: opts.idleTimeoutS,
    reusePort: false, // a second server on the same port must fail, not share its visitors
    fetch,
    error(err) {
      log.error("edge request failed", { err: String(err) });
      return new Response("internal error\n", { status: 500 });
    },
    websocket: {
      perMessageDeflate: false,
      // visitors' WebSocket messages may be as large as a record carries; agents' frames
      // are held to MAX_PAYLOAD by the frame decoder, which rejects before parsing
      maxPayloadLength: Math.max(MAX_MESSAGE, MAX_WS_MESSAGE),
      backpressureLimit: BACKPRESSURE_LIMIT,
      idleTimeout: 0,
      sendPings: false,
      open(ws: ServerWebSocket<SocketData>) {
        if (ws.data.kind === "visitor") return visitorSocket.open(ws as ServerWebSocket<VisitorSocketData>);
        const agentWs = ws as ServerWebSocket<AgentSocketData>;
        const conn = new AgentConnection(
          {
            kind: "websocket",
            remote: agentWs.data.remote,
            address: agentWs.data.address,
            send(frames) {
              const r = agentWs.send(frames);
              return r === -1 ? "backpressure" : r === 0 ? "closed" : "sent";
            },
            close: (reason) => agentWs.close(1000, reason),
          },
          edge,
        );
        agentWs.data.conn = conn;
        agents.add(conn);
      },
      message(ws: ServerWebSocket<SocketData>, message: string | Buffer) {
        if (ws.data.kind === "visitor") return visitorSocket.message(ws as ServerWebSocket<VisitorSocketData>, message);
        const conn = ws.data.conn!;
        if (typeof message === "string") return conn.refuse("PROTOCOL_ERROR", "text messages are not part of the protocol");
        conn.mux.receive(message);
      },
      drain(ws: ServerWebSocket<SocketData>) {
        if (ws.data.kind === "agent") ws.data.conn?.mux.drained();
        else visitorSocket.drain(ws as ServerWebSocket<VisitorSocketData>);
      },
      close(ws: ServerWebSocket<SocketData>, code: number, reason: string) {
        if (ws.data.connKey) connections.end(ws.data.connKey, true);
        if (ws.data.kind === "visitor") return visitorSocket.close(ws as ServerWebSocket<VisitorSocketData>, code, reason);
        if (ws.data.conn) agentLeft(ws.data.conn);
      },
    },
  });
  if (!opts.publicUrl) publicPort = listener.port;
  if (directAllowed) {
    try {
      direct = listenDirect({ host: opts.host, port: opts.agentPort!, tls: opts.tls }, edge, {
        opened: (conn) => agents.add(conn),
        closed: agentLeft,
        admit: (address) => {
          const ok = agentSockets.admit(address);
          if (!ok) overLimit("agent connection refused", { client: address, port: "direct" });
          return ok;
        },
        released: (address) => agentSockets.release(address),
      });
    } catch (err) {
      void listener.stop(true);
      const code = (err as { code?: string }).code;
      throw Object.assign(new Error(`--agent-port ${opts.agentPort}: ${(err as Error).message}`), { code });
    }
  }

  const timers = [
    setInterval(() => meter.flush(), FLUSH_INTERVAL_MS),
    setInterval(() => enforceQuotas(core, registry, meter), 1_000),
    setInterval(() => {
      const now = Date.now();
      for (const conn of agents) {
        if (now - conn.mux.lastReceivedAt > DEAD_AFTER_MS) {
          log.info("agent silent too long, closing", { session: conn.sessionId });
          conn.refuse("KEEPALIVE_TIMEOUT", `no sign of life for ${DEAD_AFTER_MS / 1000} s`);
        }
      }
    }, SWEEP_INTERVAL_MS),
    setInterval(() => connections.expire(), 1_000),
  ];
  for (const t of timers) t.unref();

  const publicUrl = `${scheme}://${domain}${portSuffix()}`;
  log.info("edge listening", { url: publicUrl, port: listener.port, agent_port: direct?.port ?? "off" });
  logDescriptorBudget(fdLimit, connections.limits.total, opts.maxConnsPerIp);
  const watch = new DescriptorWatch(fdLimit, (pressed, inUse) => {
    if (pressed) {
      // what is idle goes first; then no new connections until enough descriptors are free again
      const shed = listener.closeIdle();
      connections.closedIdle();
      listener.pause();
      log.warn("open files nearly exhausted: closed idle visitor connections and stopped accepting new ones", { in_use: inUse, limit: fdLimit, closed: shed });
    } else {
      const resumed = listener.resume();
      log.info(resumed ? "open files available again: accepting visitors" : "open files available again, but the public port could not be listened on again", { in_use: inUse, limit: fdLimit });
    }
  });
  watch.start();

  return {
    port: listener.port,
    agentPort: direct?.port,
    publicUrl,
    registry,
    async stop() {
      watch.stop();
      // 1. no new visitors or agents: the ports are free at once for a server that takes over
      listener.pause();
      direct?.stop(false);
      for (const t of registry.allTunnels()) t.stopAccepting?.();
      if (opts.holdsFile) {
        const held = registry.allTunnels().filter((t) => t.subdomain !== undefined);
        writeHolds(opts.holdsFile, held.map((t) => ({ subdomain: t.subdomain!, userId: t.userId, username: t.username, tokenId: t.tokenId, skipWarning: t.skipWarning })));
      }
      // agents that understand it connect again now, to the server that takes over, while this
      // one finishes what is in flight; the others are told SERVER_SHUTDOWN at the end
      let told = 0;
      for (const conn of agents) if (conn.drain()) told++;
      if (told > 0) log.info("told agents to connect again", { agents: told });
      // 2. requests in flight finish (up to --drain-timeout); connections that fall idle close
      const deadline = Date.now() + opts.drainTimeoutMs;
      let inFlight = listener.pendingRequests;
      if (inFlight > 0) log.info("draining visitor requests", { in_flight: inFlight, timeout_s: opts.drainTimeoutMs / 1000 });
      while ((inFlight = listener.pendingRequests) > 0 && Date.now() < deadline) {
        listener.closeIdle();
        await Bun.sleep(DRAIN_POLL_MS);
      }
      if (inFlight > 0) log.info("drain timeout: cutting the requests still in flight", { in_flight: inFlight });
      // 3. agents are told why, tunnels go, traffic is written down
      for (const t of timers) clearInterval(t);
      for (const conn of agents) conn.refuse("SERVER_SHUTDOWN", "the server is shutting down");
      for (const t of registry.allTunnels()) registry.remove(t);
      await listener.stop(true);
      direct?.stop(true);
      meter.flush();
    },
  };
}
