/**
 * The public face, wired: one Bun.serve on --http-port (public-listener.ts)
 * whose requests are routed by visitor-requests.ts (<name>.<domain> to
 * tunnel <name>; /_burrow/connect on any other host to the agents'
 * endpoint) and whose WebSockets are dispatched by kind (socket-kinds.ts);
 * the direct port for agents (direct.ts), TCP tunnels' ports (ports.ts),
 * the edge's periodic work, descriptor pressure (os/descriptors.ts) and the
 * drain on stop (drain.ts). Several nodes: what the edge needs of the
 * others comes in as OtherNodes; the edge knows nothing more of them.
 */
import { logFailedWrite } from "../db/unavailable.ts";
import type { Core } from "../core/index.ts";
import type { TrustedProxies } from "../http/addresses.ts";
import { log } from "../log.ts";
import { EdgeCounters } from "../metrics/edge-counters.ts";
import type { LiveNumbers } from "../metrics/registry.ts";
import { CONNECT_PATH, MAX_MESSAGE, NODE_PATH } from "../protocol/wire.ts";
import { AgentSessions } from "./agent-sessions.ts";
import type { EdgeContext } from "./agent-context.ts";
import { directPortAllowed, listenDirect, type DirectListener } from "./direct.ts";
import { drainEdge } from "./drain.ts";
import { HandshakeGuard } from "./handshake-guard.ts";
import { FLUSH_INTERVAL_MS, TrafficMeter } from "./meter.ts";
import { defaultMaxConns, DescriptorWatch, logDescriptorBudget, openFileLimit } from "../os/descriptors.ts";
import type { OtherNodes } from "./other-nodes.ts";
import { Loopback } from "./handoff.ts";
import { PublicPort } from "./public-port.ts";
import type { PublicListener } from "./public-listener.ts";
import { listenRedirect } from "./redirect.ts";
import { tlsTunnelRoutes } from "./tls-tunnels.ts";
import { TlsFront } from "../sockets/tls-front.ts";
import type { TlsSource } from "../tls/tls-source.ts";
import { takeHolds } from "./restart-holds.ts";
import { SocketBudget } from "../sockets/socket-budget.ts";
import { byKind, nodeSockets, sendResult, type SocketData } from "./socket-kinds.ts";
import { PortAllocator } from "./ports.ts";
import { SourceRate } from "../core/source-rate.ts";
import { UdpPortAllocator } from "./udp-ports.ts";
import { enforceQuotas } from "./quota.ts";
import type { Passthrough } from "../sockets/tls-visit.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import { TunnelPool } from "./pool.ts";
import { LiveRules } from "./live-rules.ts";
import { Registry, type Tunnel } from "./registry.ts";
import { overLimit, visitorServer } from "./visitor-requests.ts";
import { landingPage } from "./pages.ts";
import type { ActiveTunnel } from "../core/live.ts";

export interface EdgeOptions {
  core: Core;
  domain: string;
  host: string;
  port: number;
  tcpPorts: { first: number; last: number };
  /** The UDP port range (a port space apart from TCP's); undefined: no udp tunnels. */
  udpPorts?: { first: number; last: number };
  /** A udp flow with no datagram either way for this long ends (--udp-idle). */
  udpIdleMs?: number;
  /** Flows one udp tunnel holds at most (--udp-flows). */
  udpFlows?: number;
  /** Datagrams a second one source may send to udp tunnels, bursts of twice that (--udp-rate); 0: no cap. */
  udpRate?: number;
  /** The public port's certificates (files, or ACME's); none: plain HTTP. */
  tls?: TlsSource;
  /**
   * With ACME: a second, plain HTTP listener on this port that answers
   * HTTP-01 validations and sends everything else to HTTPS.
   */
  redirect?: { port: number; challenge(path: string): Response | undefined };
  /** With ACME: a name that is reserved or has a live tunnel (`<name>.<domain>`) may get its own certificate. */
  wantCertificate?(host: string): void;
  /** With ACME by TLS-ALPN-01: the way to a challenge answer for a hello that asks for one (acme/tls-alpn01.ts), before anything else. */
  tlsAlpnChallenge?(hello: ClientHello): Passthrough | undefined;
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
  /** A port for tls tunnels only, passed through by name (0: any free one); undefined: none. */
  tlsPort?: number;
  /** Seconds an idle keep-alive visitor connection stays open (requests in flight are never cut). */
  idleTimeoutS: number;
  /** Bytes and header fields a visitor's request head may hold (defaults: http-connection.ts). */
  maxRequestHeadBytes?: number;
  maxRequestFields?: number;
  /** Bytes held of what a visitor sends past the request being served (default: http-connection.ts). */
  maxReadAheadBytes?: number;
  /** How long a TLS visitor has to send its ClientHello (default: sockets/tls-front.ts). */
  tlsHelloTimeoutMs?: number;
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
  /** Several nodes on one PostgreSQL database: what the edge needs of the others (cluster/edge-nodes.ts); none on one node. */
  nodes?: OtherNodes;
  /**
   * What answers on the domain itself (the portal), made with the edge's
   * facts; none: the apex shows the landing page. Its connections are
   * handed over to a loopback server of their own, as agents' are.
   */
  apex?(facts: ApexFacts): ApexApp;
}

/** What the apex's app needs of the edge. */
export interface ApexFacts {
  /** Visitors use https (the edge's TLS, or a proxy's). */
  secure: boolean;
  /** The domain's own address as visitors write it, e.g. https://tunnels.example.com */
  origin(): string;
  /** Where a live tunnel is reached, as READY told its agent. */
  addressOf(t: ActiveTunnel): string;
}

export interface ApexApp {
  fetch(req: Request, visit: { client: string; proxied: boolean }): Promise<Response>;
}

/** The largest request body the apex's app reads (its JSON bodies are 1 MiB at most, and it says so itself). */
const APEX_MAX_BODY = 2 * 1024 * 1024;

/** A tunnel's name as visitors write it: a subdomain under the domain, a custom hostname (it has dots) as it is. */
const fullName = (name: string, domain: string) => (name.includes(".") ? name : `${name}.${domain}`);

/** What a udp tunnel's flows are held to when the options do not say (the server's flags' defaults). */
export const UDP_DEFAULTS = { idleMs: 60_000, flows: 1024, rate: 1000 };
/** Sources the per-source datagram rate remembers at most; past it the one idle longest is forgotten. */
const UDP_RATE_SOURCES = 100_000;

/** Bun queues at most this much per WebSocket before send() reports backpressure. */
const BACKPRESSURE_LIMIT = 4 * 1024 * 1024;

export interface RunningEdge {
  /** The port the edge listens on. */
  port: number;
  /** The direct port agents are moved to, when there is one. */
  agentPort?: number;
  /** The port for tls tunnels only, when there is one. */
  tlsPort?: number;
  /** With ACME, the plain HTTP port (validations and redirects). */
  redirectPort?: number;
  /** Where visitors and agents reach it, e.g. https://tunnels.example.com */
  publicUrl: string;
  registry: Registry;
  /** What is live now, for the metrics. */
  live(): LiveNumbers;
  /**
   * Settles when the names held for the agents of the server before are
   * claimed over every node (at once on one node): until then another node
   * could still give them away, so the server says it is ready after this.
   */
  namesHeld: Promise<void>;
  /** Whether the public port and the direct port (when there is one) accept connections now. */
  listening(): { edge: boolean; agents: boolean };
  stop(): Promise<void>;
}

export function startEdge(opts: EdgeOptions): RunningEdge {
  const { core, domain, nodes } = opts;
  const fdLimit = openFileLimit();
  const startedAt = Date.now();
  const counters = opts.counters ?? new EdgeCounters();
  const meter = new TrafficMeter(core);
  meter.onFlush = (seconds, rows, errors) => counters.flushed(seconds, rows, errors);
  const registry = new Registry(meter);
  nodes?.attach(registry, domain);
  // admin changes reach what is live: judged again here (and, told by the cluster, on every node)
  registry.judge = new LiveRules(core, registry, nodes?.live ?? registry);
  core.attachLiveTunnels(nodes?.live ?? registry);
  const { names: heldAtStart, claimed: namesHeld } = holdNamesOfTheServerBefore(opts, registry);
  const agents = new AgentSessions(meter);

  // descriptors nearly exhausted: nothing new is taken until enough are free again (the watch starts below)
  let pressed = false;
  const maxConns = opts.maxConns ?? defaultMaxConns(fdLimit);
  // TCP tunnels' visitors share the total with the public HTTP port's; agents' connections
  // (WebSocket and direct) have a per-address cap of their own, higher: a team behind one NAT is many agents
  const tcpVisitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: maxConns }, () => visitors.total, () => pressed);
  // the public port's per-client counts (a trusted proxy's clients apart), from each connection's first request;
  // its total is kept at accept (PublicPort's admit), where silent connections count too
  const visitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: maxConns }, () => tcpVisitors.total, () => pressed);
  const agentSockets = new SocketBudget({ perAddress: opts.maxAgentsPerIp, total: Number.MAX_SAFE_INTEGER }, undefined, () => pressed);
  const ports = new PortAllocator(opts.tcpPorts, opts.host, registry, tcpVisitors, () => counters.tcpConnections++);
  const udpRate = opts.udpRate ?? UDP_DEFAULTS.rate;
  const udpPorts =
    opts.udpPorts &&
    new UdpPortAllocator(opts.udpPorts, opts.host, registry, {
      idleMs: opts.udpIdleMs ?? UDP_DEFAULTS.idleMs,
      maxFlows: opts.udpFlows ?? UDP_DEFAULTS.flows,
      // one bucket per source over every udp tunnel; the sources remembered are bounded as the DNS responder's are
      rate: udpRate > 0 ? new SourceRate({ perClientPerSecond: udpRate, perClientBurst: 2 * udpRate, maxClients: UDP_RATE_SOURCES }) : undefined,
      counters: counters.udp,
    });
  const admitAgent = (port: "public" | "direct") => (address: string) => {
    const ok = agentSockets.admit(address);
    if (!ok) overLimit("agent connection refused", { client: address, port });
    return ok;
  };

  // what visitors see: the edge's own TLS and port, unless a proxy in front says otherwise
  const scheme = opts.publicUrl?.scheme ?? (opts.tls ? "https" : "http");
  const secure = scheme === "https";
  let publicPort = opts.publicUrl?.port ?? opts.port;
  const portSuffix = () => (publicPort === (secure ? 443 : 80) ? "" : `:${publicPort}`);
  let direct: DirectListener | undefined;
  // tls tunnels' visitors: by name on the public port when it has TLS, and on --tls-port
  const tlsTunnels = tlsTunnelRoutes(registry, domain, tcpVisitors, () => counters.tcpConnections++, nodes && ((name) => nodes.find(name)));
  let tlsOnly: TlsFront<undefined> | undefined;
  const edge: EdgeContext = {
    core,
    registry,
    live: nodes?.live ?? registry,
    nodes,
    ports,
    udpPorts,
    // a name with dots is a custom hostname, reached as it is; a subdomain is under the domain
    httpUrl: (name) => `${scheme}://${fullName(name, domain)}${portSuffix()}`,
    tcpAddress: (port) => `${domain}:${port}`,
    udpAddress: (port) => `udp://${domain}:${port}`,
    tlsAddress: (sub) => {
      if (opts.tls) return `tls://${fullName(sub, domain)}${publicPort === 443 ? "" : `:${publicPort}`}`;
      return tlsOnly ? `tls://${fullName(sub, domain)}:${tlsOnly.port}` : undefined;
    },
    directPort: () => direct?.port,
    maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
    oidcHttpIssuers: opts.oidcHttpIssuers ?? false,
    basicAuthLimit: opts.basicAuthLimit,
    handshakes: new HandshakeGuard(opts.handshakeLimit, () => core.clock.now().getTime()),
    counters,
  };

  const links = nodes?.links;
  const listener = new PublicPort({
    hostname: opts.host,
    port: opts.port,
    tls: opts.tls,
    idleTimeoutS: opts.idleTimeoutS,
    maxHeadBytes: opts.maxRequestHeadBytes,
    maxFields: opts.maxRequestFields,
    maxReadAheadBytes: opts.maxReadAheadBytes,
    helloTimeoutMs: opts.tlsHelloTimeoutMs,
    // the CA validating TLS-ALPN-01 gets the challenge certificate; a tls tunnel's name passes through
    // undecrypted; every other name is the edge's to decrypt
    route: (hello) => opts.tlsAlpnChallenge?.(hello) ?? tlsTunnels.route(hello, "terminate" as const),
    // every open connection holds a descriptor, requests or not: past the total, or short of descriptors, none is kept
    admit(open) {
      if (!pressed && open + tcpVisitors.total < maxConns) return true;
      overLimit("visitor connection refused", { limit: pressed ? "open files" : "max-conns" });
      return false;
    },
    server: visitorServer({
      domain,
      secure,
      registry,
      budget: visitors,
      trustedProxies: opts.trustedProxies,
      responseTimeoutMs: opts.responseTimeoutMs,
      maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
      startedAt,
      heldAtStart,
      admitAgent: admitAgent("public"),
      releaseAgent: (address) => agentSockets.release(address),
      counters,
      loopback: () => loopback as unknown as Loopback<unknown>,
      apex: () => apexServer(),
      directPort: () => direct?.port,
      tlsAddress: (sub: string) => edge.tlsAddress(sub),
      ...(nodes ? { remote: async (name: string) => nodes.find(name), poolOthers: (name: string) => nodes.poolOthers(name) } : {}),
    }),
  });
  // agents' and nodes' WebSockets: handed over by the public port to a loopback Bun.serve (handoff.ts)
  // made after the public port, whose failure to listen must leave nothing running
  const loopback = new Loopback<SocketData>({
    fetch(req, server, visit) {
      const path = URL.parse(req.url)?.pathname;
      if (path === NODE_PATH && links && !visit.agent) {
        const nodeId = links.acceptNode(req);
        if (nodeId === undefined) return new Response("not a node of this cluster\n", { status: 401 });
        return server.upgrade(req, { data: { kind: "node", nodeId } }) ? undefined : new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      if (path === CONNECT_PATH && visit.agent) {
        if (server.upgrade(req, { data: { kind: "agent", remote: visit.peer, address: visit.client, counted: visit.client } })) return undefined;
        agentSockets.release(visit.client);
        return new Response("expected a WebSocket upgrade\n", { status: 426 });
      }
      if (visit.agent) agentSockets.release(visit.client);
      return landingPage(domain);
    },
    websocket: {
      perMessageDeflate: false,
      // agents' frames are held to MAX_PAYLOAD by the frame decoder, which rejects before parsing
      maxPayloadLength: MAX_MESSAGE,
      backpressureLimit: BACKPRESSURE_LIMIT,
      idleTimeout: 0,
      sendPings: false,
      ...byKind({
        agent: agents.webSockets(edge, agentSockets),
        node: nodeSockets((nodeId, ws) => {
          if (!links) throw new Error("a node's link on an edge that does not relay");
          return links.linked(nodeId, { send: (frames) => sendResult(ws.send(frames)), close: (reason) => ws.close(1000, reason) });
        }),
      }),
    },
  });
  const apexApp = opts.apex?.({
    secure,
    origin: () => `${scheme}://${domain}${portSuffix()}`,
    addressOf: (t) => {
      if (t.private) return t.private.target;
      const name = t.hostname ?? t.subdomain ?? "";
      if (t.protocol === "tcp") return edge.tcpAddress(t.port ?? 0);
      if (t.protocol === "udp") return edge.udpAddress(t.port ?? 0);
      if (t.protocol === "tls") return edge.tlsAddress(name) ?? "";
      return edge.httpUrl(name);
    },
  });
  // the apex's connections (the portal's): plain requests, idle ones closed as the public port's are;
  // its loopback server listens from the first such request on, not before (a descriptor less while unused)
  let apexLoopback: Loopback<undefined> | undefined;
  let stopped = false;
  const apexServer = () => {
    if (!apexApp || stopped) return undefined;
    apexLoopback ??= new Loopback<undefined>({
      fetch: (req, _server, visit) => apexApp.fetch(req, { client: visit.client, proxied: visit.proxied === true }),
      idleTimeoutS: opts.idleTimeoutS,
      maxRequestBodySize: APEX_MAX_BODY,
    });
    return apexLoopback;
  };
  if (!opts.publicUrl) publicPort = listener.port;
  const redirect = opts.redirect && listenRedirect({ host: opts.host, port: opts.redirect.port, httpsPort: () => publicPort, challenge: opts.redirect.challenge, idleTimeoutS: opts.idleTimeoutS });
  const stopWantingCertificates = wantCertificates(opts, registry);
  if (opts.agentPort !== undefined && !directPortAllowed(opts)) {
    log.info("no direct agent port: the edge has no certificate of its own behind an https --public-url");
  } else if (opts.agentPort !== undefined) {
    try {
      direct = listenDirect({ host: opts.host, port: opts.agentPort, tls: opts.tls }, edge, {
        opened: (conn) => agents.add(conn),
        closed: (conn) => agents.left(conn),
        admit: admitAgent("direct"),
        released: (address) => agentSockets.release(address),
      });
    } catch (err) {
      void listener.stop(true);
      void loopback.stop(true);
      void apexLoopback?.stop(true);
      const code = (err as { code?: string }).code;
      throw Object.assign(new Error(`--agent-port ${opts.agentPort}: ${(err as Error).message}`), { code });
    }
  }

  if (opts.tlsPort !== undefined) {
    try {
      tlsOnly = new TlsFront<undefined>({
        hostname: opts.host,
        port: opts.tlsPort,
        helloTimeoutMs: opts.tlsHelloTimeoutMs,
        // no certificates: a name that is no tls tunnel's gets unrecognized_name
        route: (hello) => tlsTunnels.route(hello, "unrecognized" as const),
        socket: { open: (socket) => void socket.terminate() },
      });
    } catch (err) {
      void listener.stop(true);
      void loopback.stop(true);
      void apexLoopback?.stop(true);
      direct?.stop(true);
      const code = (err as { code?: string }).code;
      throw Object.assign(new Error(`--tls-port ${opts.tlsPort}: ${(err as Error).message}`), { code });
    }
  }

  const stopChores = startChores(core, registry, meter);

  const publicUrl = `${scheme}://${domain}${portSuffix()}`;
  log.info("edge listening", { url: publicUrl, port: listener.port, agent_port: direct?.port ?? "off", tls_port: tlsOnly?.port ?? "off" });
  logDescriptorBudget(fdLimit, maxConns, opts.maxConnsPerIp);
  const watch = watchDescriptors(fdLimit, { listener, redirect }, (now) => (pressed = now));

  return {
    port: listener.port,
    agentPort: direct?.port,
    tlsPort: tlsOnly?.port,
    redirectPort: redirect?.port,
    publicUrl,
    registry,
    namesHeld,
    live: () => ({
      agents: agents.readyCounts(),
      tunnels: registry.liveCounts(),
      visitorConnections: { http: visitors.total, tcp: tcpVisitors.total },
      bytes: { in: meter.totalIn, out: meter.totalOut },
    }),
    listening: () => ({ edge: !listener.paused, agents: direct ? direct.listening : !listener.paused }),
    stop: () =>
      drainEdge({
        listener: {
          pause: () => listener.pause(),
          closeIdle: () => listener.closeIdle(),
          get pendingRequests() {
            return listener.pendingRequests;
          },
          // the loopback server first: its agents' last words pass through the public port as it closes
          stop: async (force) => {
            stopped = true;
            await Promise.all([loopback.stop(force), apexLoopback?.stop(force)]);
            await Promise.all([listener.stop(force), tlsOnly?.stop(force)]);
          },
        },
        redirect,
        direct,
        registry,
        agents,
        meter,
        holdsFile: opts.holdsFile,
        drainTimeoutMs: opts.drainTimeoutMs,
        stopWatching() {
          watch.stop();
          stopWantingCertificates?.();
        },
        stopTimers: stopChores,
        closeLinks: () => nodes?.close(),
      }),
  };
}

/** The edge's periodic work: traffic written down, quotas enforced. Returns how to stop it. */
function startChores(core: Core, registry: Registry, meter: TrafficMeter): () => void {
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
  ];
  for (const t of timers) t.unref();
  return () => timers.forEach(clearInterval);
}

/**
 * Descriptors nearly exhausted: what is idle goes first, then no new
 * connections on the public (and redirect) port until enough are free again.
 * `pressed` tells the socket budgets, which then take nothing new either.
 */
function watchDescriptors(
  fdLimit: number | undefined,
  edge: { listener: PublicPort; redirect?: PublicListener<undefined> },
  pressed: (now: boolean) => void,
): DescriptorWatch {
  const { listener, redirect } = edge;
  const watch = new DescriptorWatch(fdLimit, (nowPressed, inUse) => {
    pressed(nowPressed);
    if (nowPressed) {
      const shed = listener.closeIdle() + (redirect?.closeIdle() ?? 0);
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
  return watch;
}

/**
 * Names the server before us (same data dir) had live when it stopped: held
 * for their tokens a while, and with several nodes claimed over all of them
 * (`claimed` settles when that is written).
 */
function holdNamesOfTheServerBefore(opts: EdgeOptions, registry: Registry): { names: Set<string>; claimed: Promise<void> } {
  const names = new Set<string>();
  const claims: Promise<void>[] = [];
  if (!opts.holdsFile) return { names, claimed: Promise.resolve() };
  // a pool's members are held in one pool, each for its token
  const pools = new Map<string, TunnelPool<Tunnel>>();
  for (const h of takeHolds(opts.holdsFile)) {
    const address = { ...(h.subdomain !== undefined ? { subdomain: h.subdomain } : {}), ...(h.hostname !== undefined ? { hostname: h.hostname } : {}) };
    const tunnel = registry.newTunnel(h.protocol, address, h, h.skipWarning);
    const name = (h.subdomain ?? h.hostname)!;
    if (h.pool && h.protocol === "http") {
      const pool = pools.get(name) ?? new TunnelPool<Tunnel>(h.pool, h.userId);
      pools.set(name, pool);
      pool.add(tunnel);
    }
    if (!registry.hold(tunnel)) continue;
    if (opts.nodes) claims.push(opts.nodes.holdAtStart(tunnel));
    for (const n of [h.subdomain, h.hostname]) if (n !== undefined) names.add(n);
  }
  if (names.size > 0) log.info("holding names for the agents of the server before", { names: names.size });
  return { names, claimed: Promise.all(claims).then(() => {}) };
}

/** With ACME: a name that is reserved or has a live tunnel (a custom hostname included) gets its own certificate. Returns how to stop. */
function wantCertificates(opts: EdgeOptions, registry: Registry): (() => void) | undefined {
  const want = opts.wantCertificate;
  if (!want) return undefined;
  const { core, domain } = opts;
  registry.onLive = (name) => want(fullName(name, domain));
  // names reserved before this start, then each as it is reserved
  void core.domains.list().then((reserved) => {
    for (const r of reserved) want(`${r.subdomain}.${domain}`);
  });
  return core.domains.onReserve((sub) => want(`${sub}.${domain}`));
}
