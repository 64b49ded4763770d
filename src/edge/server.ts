/**
 * The public face: one Bun.serve on --http-port. Requests for
 * <name>.<domain> go to tunnel <name>; on any other host, /_burrow/connect
 * is where agents connect. Agents that can are moved to the direct port
 * (--agent-port, direct.ts). TCP tunnels listen on their own ports (ports.ts).
 */
import { logFailedWrite } from "../db/unavailable.ts";
import type { Server, ServerWebSocket } from "bun";
import type { Core } from "../core/index.ts";
import type { TrustedProxies } from "../http/addresses.ts";
import { log } from "../log.ts";
import { EdgeCounters } from "../metrics/edge-counters.ts";
import type { LiveNumbers } from "../metrics/registry.ts";
import { DEAD_AFTER_MS, MAX_MESSAGE } from "../protocol/wire.ts";
import { MAX_WS_MESSAGE } from "../protocol/ws-records.ts";
import { AgentConnection, type AgentSocketData, type EdgeContext } from "./agents.ts";
import { directPortAllowed, listenDirect } from "./direct.ts";
import { HandshakeGuard } from "./handshake-guard.ts";
import { FLUSH_INTERVAL_MS, TrafficMeter } from "./meter.ts";
import { defaultMaxConns, DescriptorWatch, logDescriptorBudget, openFileLimit } from "./descriptors.ts";
import { PublicListener } from "./public-listener.ts";
import { listenRedirect } from "./redirect.ts";
import type { TlsSource } from "./tls-source.ts";
import { takeHolds, writeHolds } from "./restart-holds.ts";
import { SocketBudget } from "./socket-budget.ts";
import { establishedPeers } from "./kernel-sockets.ts";
import { VisitorConnections } from "./visitor-connections.ts";
import { PortAllocator } from "./ports.ts";
import { enforceQuotas } from "./quota.ts";
import { Registry } from "./registry.ts";
import type { SendResult } from "../protocol/mux.ts";
import { RemoteTunnels } from "../cluster/remote-tunnels.ts";
import { RelayIn, RelayOut } from "../cluster/relay.ts";
import { verifyNodeAuthorization } from "../cluster/node-auth.ts";
import type { Cluster } from "../cluster/cluster.ts";
import { visitorSocket, type VisitorSocketData } from "./websocket.ts";
import { overLimit, visitorFetch, type NodeSocketData, type SocketData } from "./visitor-requests.ts";

export interface EdgeOptions {
  core: Core;
  domain: string;
  host: string;
  port: number;
  tcpPorts: { first: number; last: number };
  /** The public port's certificates (files, or ACME's); none: plain HTTP. */
  tls?: TlsSource;
  /**
   * With ACME: a second, plain HTTP listener on this port that answers
   * HTTP-01 validations and sends everything else to HTTPS.
   */
  redirect?: { port: number; challenge(path: string): Response | undefined };
  /** With ACME: a name that is reserved or has a live tunnel (`<name>.<domain>`) may get its own certificate. */
  wantCertificate?(host: string): void;
  responseTimeoutMs: number;
  /** The longest response timeout an agent may ask for its tunnel. */
  maxResponseTimeoutMs: number;
  /** Plain-http OIDC issuers on loopback may be used by tunnels (--oidc-http-issuers loopback). */
  oidcHttpIssuers?: boolean;
  /** Wrong basic-auth passwords one address may try on a tunnel before it is locked (--basic-auth-limit). */
  basicAuthLimit?: number;
  /** Scheme and port visitors use, when a proxy in front differs from what the edge listens on. */
  publicUrl?: { scheme: "http" | "https"; port: number };
  /** The direct port for agents (0: any free one); undefined: agents stay on the WebSocket. */
  agentPort?: number;
  /** Seconds an idle keep-alive visitor connection stays open (requests in flight are never cut). */
  idleTimeoutS: number;
  /** Concurrent connections one client address may hold on the public listeners. */
  maxConnsPerIp: number;
  /** Concurrent agent connections one client address may hold (WebSocket and direct port together). */
  maxAgentsPerIp: number;
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
  /** What the edge counts for the metrics (requests, handshakes, resets, flushes); its own if not given. */
  counters?: EdgeCounters;
  /** Several nodes on one PostgreSQL database: what is live cluster-wide (started before the edge). */
  cluster?: Cluster;
  /** --cluster-secret: the nodes relay visitors to each other (without it, each serves only its own tunnels). */
  clusterSecret?: string;
  /** --relay-lookups: other nodes' names looked up at once (RemoteTunnels). */
  relayLookups?: number;
}




const SWEEP_INTERVAL_MS = 5_000;
/** While draining, how often the edge looks whether requests are still in flight. */
const DRAIN_POLL_MS = 50;
/** Bun queues at most this much per WebSocket before send() reports backpressure. */
const BACKPRESSURE_LIMIT = 4 * 1024 * 1024;

/** Bun's ServerWebSocket.send answer as the mux reads it: -1 queued past the limit, 0 dropped. */
const sendResult = (r: number): SendResult => (r === -1 ? "backpressure" : r === 0 ? "closed" : "sent");

export interface RunningEdge {
  /** The port the edge listens on. */
  port: number;
  /** The direct port agents are moved to, when there is one. */
  agentPort?: number;
  /** With ACME, the plain HTTP port (validations and redirects). */
  redirectPort?: number;
  /** Where visitors and agents reach it, e.g. https://tunnels.example.com */
  publicUrl: string;
  registry: Registry;
  /** What is live now, for the metrics. */
  live(): LiveNumbers;
  /** Whether the public port and the direct port (when there is one) accept connections now. */
  listening(): { edge: boolean; agents: boolean };
  stop(): Promise<void>;
}

export function startEdge(opts: EdgeOptions): RunningEdge {
  const { core, domain } = opts;
  const fdLimit = openFileLimit();
  const startedAt = Date.now();
  /** Names the server before us (same data dir) had live when it stopped; held for their tokens. */
  const heldAtStart = new Set<string>();
  const counters = opts.counters ?? new EdgeCounters();
  const meter = new TrafficMeter(core);
  meter.onFlush = (seconds, rows, errors) => counters.flushed(seconds, rows, errors);
  const registry = new Registry(meter);
  opts.cluster?.attach(registry);
  core.attachLiveTunnels(opts.cluster ?? registry);
  const maxConns = opts.maxConns ?? defaultMaxConns(fdLimit);
  // TCP tunnels' visitors share the total with the public HTTP port's; agents' connections
  // (WebSocket and direct) have a per-address cap of their own, higher: a team behind one NAT is many agents
  const tcpVisitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: maxConns }, () => connections.total, () => watch.pressed);
  const agentSockets = new SocketBudget({ perAddress: opts.maxAgentsPerIp, total: Number.MAX_SAFE_INTEGER }, undefined, () => watch.pressed);
  const ports = new PortAllocator(opts.tcpPorts, opts.host, registry, tcpVisitors, () => counters.tcpConnections++);
  if (opts.holdsFile) {
    for (const h of takeHolds(opts.holdsFile)) {
      const held = registry.newTunnel("http", { subdomain: h.subdomain }, h, h.skipWarning);
      registry.hold(held);
      opts.cluster?.holdAtStart(held);
      heldAtStart.add(h.subdomain);
    }
    if (heldAtStart.size > 0) log.info("holding names for the agents of the server before", { names: heldAtStart.size });
  }
  const agents = new Set<AgentConnection>();
  /** An agent's connection closed (WebSocket or direct): its session ends, its traffic is written down. */
  const agentLeft = (conn: AgentConnection) => {
    agents.delete(conn);
    conn.closed();
    void meter.flush();
  };
  // what visitors see: the edge's own TLS and port, unless a proxy in front says otherwise
  const scheme = opts.publicUrl?.scheme ?? (opts.tls ? "https" : "http");
  const secure = scheme === "https";
  let publicPort = opts.publicUrl?.port ?? opts.port;

  const portSuffix = () => (publicPort === (secure ? 443 : 80) ? "" : `:${publicPort}`);
  const directAllowed = directPortAllowed(opts);
  if (opts.agentPort !== undefined && !directAllowed) {
    log.info("no direct agent port: the edge has no certificate of its own behind an https --public-url");
  }
  let direct: ReturnType<typeof listenDirect> | undefined;
  let stopWantingReserved: (() => void) | undefined;
  const edge: EdgeContext = {
    core,
    registry,
    live: opts.cluster ?? registry,
    cluster: opts.cluster,
    ports,
    httpUrl: (sub) => `${scheme}://${sub}.${domain}${portSuffix()}`,
    tcpAddress: (port) => `${domain}:${port}`,
    directPort: () => direct?.port,
    maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
    oidcHttpIssuers: opts.oidcHttpIssuers ?? false,
    basicAuthLimit: opts.basicAuthLimit,
    handshakes: new HandshakeGuard(opts.handshakeLimit, () => core.clock.now().getTime()),
    counters,
  };

  const connections = new VisitorConnections(
    { perAddress: opts.maxConnsPerIp, total: maxConns, idleTimeoutS: opts.idleTimeoutS },
    () => listener.port,
    () => tcpVisitors.total,
    undefined,
    // an edge on an IPv4 address has no IPv6 peers: the kernel's tcp6 table need not be read
    (port) => establishedPeers(port, !/^\d+\.\d+\.\d+\.\d+$/.test(opts.host)),
  );

  const relayOut = opts.cluster && opts.clusterSecret ? new RelayOut(opts.cluster.nodeId, opts.clusterSecret) : undefined;
  const remote = opts.cluster && new RemoteTunnels(opts.cluster, relayOut, registry, domain, opts.relayLookups);

  const fetch = visitorFetch({
    domain,
    secure,
    registry,
    connections,
    trustedProxies: opts.trustedProxies,
    idleTimeoutS: opts.idleTimeoutS,
    responseTimeoutMs: opts.responseTimeoutMs,
    maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
    startedAt,
    heldAtStart,
    admitAgent: (address) => {
      const ok = agentSockets.admit(address);
      if (!ok) overLimit("agent connection refused", { client: address, port: "public" });
      return ok;
    },
    releaseAgent: (address) => agentSockets.release(address),
    counters,
    ...(remote ? { remote: async (name: string) => remote.find(name) } : {}),
    ...(opts.cluster && opts.clusterSecret ? { acceptNode: (req: Request) => verifyNodeAuthorization(req.headers.get("authorization"), opts.clusterSecret!) } : {}),
  });

  const listener = new PublicListener<SocketData>({
    hostname: opts.host,
    port: opts.port,
    ...(opts.tls ? { tls: opts.tls.entries() } : {}),
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
        if (ws.data.kind === "node") {
          const nodeWs = ws as ServerWebSocket<NodeSocketData>;
          nodeWs.data.relay = new RelayIn(
            nodeWs.data.nodeId,
            (frames) => sendResult(nodeWs.send(frames)),
            (reason) => nodeWs.close(1000, reason),
            registry,
          );
          log.info("relay link from another node", { node: nodeWs.data.nodeId });
          return;
        }
        const agentWs = ws as ServerWebSocket<AgentSocketData>;
        const conn = new AgentConnection(
          {
            kind: "websocket",
            remote: agentWs.data.remote,
            address: agentWs.data.address,
            send: (frames) => sendResult(agentWs.send(frames)),
            close: (reason) => agentWs.close(1000, reason),
          },
          edge,
        );
        agentWs.data.conn = conn;
        agents.add(conn);
      },
      message(ws: ServerWebSocket<SocketData>, message: string | Buffer) {
        if (ws.data.kind === "visitor") return visitorSocket.message(ws as ServerWebSocket<VisitorSocketData>, message);
        if (ws.data.kind === "node") {
          if (typeof message !== "string") ws.data.relay?.mux.receive(message);
          return;
        }
        const conn = ws.data.conn!;
        if (typeof message === "string") return conn.refuse("PROTOCOL_ERROR", "text messages are not part of the protocol");
        conn.mux.receive(message);
      },
      drain(ws: ServerWebSocket<SocketData>) {
        if (ws.data.kind === "node") return ws.data.relay?.mux.drained();
        if (ws.data.kind === "agent") ws.data.conn?.mux.drained();
        else visitorSocket.drain(ws as ServerWebSocket<VisitorSocketData>);
      },
      close(ws: ServerWebSocket<SocketData>, code: number, reason: string) {
        if (ws.data.kind === "node") return ws.data.relay?.mux.close();
        if (ws.data.kind === "visitor" && ws.data.connKey) connections.end(ws.data.connKey, true);
        if (ws.data.kind === "agent" && ws.data.counted !== undefined) agentSockets.release(ws.data.counted);
        if (ws.data.kind === "visitor") return visitorSocket.close(ws as ServerWebSocket<VisitorSocketData>, code, reason);
        if (ws.data.conn) agentLeft(ws.data.conn);
      },
    },
  });
  if (!opts.publicUrl) publicPort = listener.port;
  const stopSwapping = opts.tls?.onChange(() => listener.setTls(opts.tls!.entries()));
  const redirect = opts.redirect && listenRedirect({ host: opts.host, port: opts.redirect.port, httpsPort: () => publicPort, challenge: opts.redirect.challenge, idleTimeoutS: opts.idleTimeoutS });
  if (opts.wantCertificate) {
    const want = opts.wantCertificate;
    registry.onLive = (sub) => want(`${sub}.${domain}`);
    // names reserved before this start, then each as it is reserved
    void core.domains.list().then((reserved) => {
      for (const r of reserved) want(`${r.subdomain}.${domain}`);
    });
    stopWantingReserved = core.domains.onReserve((sub) => want(`${sub}.${domain}`));
  }
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

  let checkingQuotas = false;
  const timers = [
    setInterval(() => void meter.flush(), FLUSH_INTERVAL_MS),
    setInterval(() => {
      // one check at a time: a slow database must not pile them up
      if (checkingQuotas) return;
      checkingQuotas = true;
      enforceQuotas(core, registry, meter)
        .catch((err) => logFailedWrite("quota check failed", {}, err))
        .finally(() => (checkingQuotas = false));
    }, 1_000),
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
      const shed = listener.closeIdle() + (redirect?.closeIdle() ?? 0);
      connections.closedIdle();
      listener.pause();
      redirect?.pause();
      log.warn("open files nearly exhausted: closed idle visitor connections and stopped accepting new ones", { in_use: inUse, limit: fdLimit, closed: shed });
    } else {
      const resumed = listener.resume();
      redirect?.resume();
      log.info(resumed ? "open files available again: accepting visitors" : "open files available again, but the public port could not be listened on again", { in_use: inUse, limit: fdLimit, err: listener.listenError });
    }
  });
  watch.start();

  return {
    port: listener.port,
    agentPort: direct?.port,
    redirectPort: redirect?.port,
    publicUrl,
    registry,
    live() {
      const agentCounts = { websocket: 0, direct: 0 };
      for (const conn of agents) if (conn.isReady) agentCounts[conn.transportKind]++;
      return {
        agents: agentCounts,
        tunnels: registry.liveCounts(),
        visitorConnections: { http: connections.total, tcp: tcpVisitors.total },
        bytes: { in: meter.totalIn, out: meter.totalOut },
      };
    },
    listening: () => ({ edge: !listener.paused, agents: direct ? direct.listening : !listener.paused }),
    async stop() {
      watch.stop();
      // 1. no new visitors or agents: the ports are free at once for a server that takes over
      listener.pause();
      stopSwapping?.();
      stopWantingReserved?.();
      redirect?.pause();
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
      await redirect?.stop(true);
      direct?.stop(true);
      relayOut?.close();
      await meter.flush();
    },
  };
}
