/**
 * The edge, wired from its parts: the public port on --http-port
 * (public-port.ts, a Bun.listen; with TLS, sockets/tls-front.ts decrypts by
 * server name and passes a tls tunnel's name on undecrypted) whose
 * connections http-connection.ts reads as HTTP/1.1 and whose requests
 * visitor-requests.ts routes (<name>.<domain> to tunnel <name>; the agents'
 * and nodes' paths on any host that is no tunnel's name), their WebSockets
 * handed to a loopback server (loopbacks.ts); the direct port for agents
 * (direct.ts), tcp tunnels' ports (ports.ts), udp ports (udp-ports.ts), the
 * port for tls tunnels only (tls-tunnels.ts), the ACME redirect port
 * (redirect.ts), the budgets and the descriptor watch (edge-budgets.ts), the
 * periodic work (chores.ts), the names held from the server before
 * (held-at-start.ts) and the drain on stop (drain.ts). Several nodes: what
 * the edge needs of the others comes in as OtherNodes; the edge knows
 * nothing more of them.
 */
import { setNodeRegion } from "./traffic-policy/node-region.ts";
import { log } from "../log.ts";
import { EdgeCounters } from "../metrics/edge-counters.ts";
import type { TlsFront } from "../sockets/tls-front.ts";
import type { EdgeContext } from "./agent-context.ts";
import { AgentSessions } from "./agent-sessions.ts";
import { startChores, wantCertificates } from "./chores.ts";
import { EdgeEvents } from "./edge-events.ts";
import { directPortAllowed, listenDirect, type DirectListener } from "./direct.ts";
import { drainEdge } from "./drain.ts";
import { EdgeBudgets } from "./edge-budgets.ts";
import type { EdgeOptions, RunningEdge } from "./edge-options.ts";
import { HandshakeGuard } from "./handshake-guard.ts";
import type { Loopback } from "./handoff.ts";
import { holdNamesOfTheServerBefore } from "./held-at-start.ts";
import { LiveRules } from "./live-rules.ts";
import { ApexLoopback, socketsLoopback } from "./loopbacks.ts";
import { TrafficMeter } from "./meter.ts";
import { PortAllocator } from "./ports.ts";
import { kindAddress, PublicAddresses } from "./public-addresses.ts";
import { PublicPort } from "./public-port.ts";
import { listenRedirect } from "./redirect.ts";
import { Registry } from "./registry.ts";
import { EdgePolicies } from "./traffic-policy/edge-policies.ts";
import { NOT_LOADED, OperatorLayers } from "./traffic-policy/operator-layers.ts";
import { listenTlsOnly, tlsTunnelRoutes } from "./tls-tunnels.ts";
import { udpPortsFor } from "./udp-ports.ts";
import { visitorServer } from "./visitor-requests.ts";

export type { ApexApp, ApexFacts, EdgeOptions, RunningEdge } from "./edge-options.ts";

export function startEdge(opts: EdgeOptions): RunningEdge {
  const { core, domain, nodes } = opts;
  const startedAt = Date.now();
  setNodeRegion(opts.region ?? "");
  const counters = opts.counters ?? new EdgeCounters();
  const meter = new TrafficMeter(core);
  meter.onFlush = (seconds, rows, errors) => counters.flushed(seconds, rows, errors);
  const registry = new Registry(meter);
  nodes?.attach(registry, domain);
  // admin changes reach what is live: judged again here (and, told by the cluster, on every node)
  registry.judge = new LiveRules(core, registry, nodes?.live ?? registry);
  core.attachLiveTunnels(nodes?.live ?? registry);
  const { names: heldAtStart, claimed: namesHeld } = holdNamesOfTheServerBefore(opts.holdsFile, registry, nodes);
  const agents = new AgentSessions(meter);
  const budgets = new EdgeBudgets(opts);
  const ports = new PortAllocator(opts.tcpPorts, opts.host, registry, budgets.tcpVisitors, () => counters.tcpConnections++, Bun.listen, opts.policy?.connectMaxBytes);
  const udpPorts = udpPortsFor(opts.udpPorts, opts.host, registry, { idleMs: opts.udpIdleMs, flows: opts.udpFlows, rate: opts.udpRate }, counters.udp);
  const addresses = new PublicAddresses(domain, { publicUrl: opts.publicUrl, tls: opts.tls !== undefined, port: opts.port });
  const events = new EdgeEvents(core, opts.nodeName ?? "local", (t) =>
    t.privateName !== undefined ? `${t.username}/${t.privateName}` : (kindAddress(addresses, t.protocol, t.hostname ?? t.subdomain ?? "", t.port ?? 0) ?? ""),
  );
  events.attach(registry);
  let direct: DirectListener | undefined;
  // tls tunnels' visitors: by name on the public port when it has TLS, and on --tls-port
  const tlsTunnels = tlsTunnelRoutes(registry, domain, budgets.tcpVisitors, () => counters.tcpConnections++, nodes && ((name) => nodes.find(name)), opts.policy?.connectMaxBytes);
  let tlsOnly: TlsFront<undefined> | undefined;
  const policies = new EdgePolicies(domain, { ...opts.policy, httpLoopback: opts.oidcHttpIssuers ?? false, basicAuthLimit: opts.basicAuthLimit });
  // the operator's policies, read now and followed: until they are read, tunnels meet a layer that lets nothing through
  policies.notLoaded = NOT_LOADED;
  const operatorLayers = new OperatorLayers(policies, core.trafficPolicies, () => registry.allTunnels(), opts.policy?.reloadMs);
  void operatorLayers.start();
  const edge: EdgeContext = {
    core,
    registry,
    live: nodes?.live ?? registry,
    nodes,
    ports,
    udpPorts,
    httpUrl: (name) => addresses.httpUrl(name),
    tcpAddress: (port) => addresses.tcpAddress(port),
    udpAddress: (port) => addresses.udpAddress(port),
    tlsAddress: (name) => addresses.tlsAddress(name),
    directPort: () => direct?.port,
    maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
    oidcHttpIssuers: opts.oidcHttpIssuers ?? false,
    basicAuthLimit: opts.basicAuthLimit,
    handshakes: new HandshakeGuard(opts.handshakeLimit, () => core.clock.now().getTime()),
    counters,
    policies,
    events,
    admissionHook: opts.admissionHook,
  };

  const listener = new PublicPort({
    hostname: opts.host,
    port: opts.port,
    tls: opts.tls,
    idleTimeoutS: opts.idleTimeoutS,
    maxHeadBytes: opts.maxRequestHeadBytes,
    maxFields: opts.maxRequestFields,
    maxReadAheadBytes: opts.maxReadAheadBytes,
    helloTimeoutMs: opts.tlsHelloTimeoutMs,
    // h2 by ALPN for every name but the domain itself (the portal, the agents' WebSocket: HTTP/1.1)
    http2: opts.http2 && {
      alpn: opts.http2.alpn ? (serverName) => serverName === undefined || serverName.toLowerCase() !== domain : undefined,
      priorKnowledge: opts.http2.priorKnowledge,
    },
    // the CA validating TLS-ALPN-01 gets the challenge certificate; a tls tunnel's name passes through
    // undecrypted; every other name is the edge's to decrypt
    route: (hello) => opts.tlsAlpnChallenge?.(hello) ?? tlsTunnels.route(hello, "terminate" as const),
    admit: (open) => budgets.admitOpen(open),
    server: visitorServer({
      domain,
      secure: addresses.secure,
      registry,
      budget: budgets.visitors,
      trustedProxies: opts.trustedProxies,
      responseTimeoutMs: opts.responseTimeoutMs,
      maxResponseTimeoutMs: opts.maxResponseTimeoutMs,
      startedAt,
      heldAtStart,
      admitAgent: budgets.admitAgent("public"),
      releaseAgent: (address) => budgets.agents.release(address),
      counters,
      loopback: () => loopback as unknown as Loopback<unknown>,
      apex: () => apex.get(),
      directPort: () => direct?.port,
      tlsAddress: (sub: string) => edge.tlsAddress(sub),
      http2: opts.http2 && (opts.http2.alpn || opts.http2.priorKnowledge) ? { limits: opts.http2.limits, maxFields: opts.maxRequestFields } : undefined,
      ...(nodes ? { remote: async (name: string) => nodes.find(name), poolOthers: (name: string) => nodes.poolOthers(name) } : {}),
    }),
  });
  // made after the public port, whose failure to listen must leave nothing running
  const loopback = socketsLoopback({ domain, edge, agents, budget: budgets.agents, links: nodes?.links });
  const apexApp = opts.apex?.({ secure: addresses.secure, origin: () => addresses.origin(), addressOf: (t) => addresses.addressOf(t) });
  const apex = new ApexLoopback(apexApp, opts.idleTimeoutS);
  if (!opts.publicUrl) addresses.port = listener.port;
  const redirect = opts.redirect && listenRedirect({ host: opts.host, port: opts.redirect.port, httpsPort: () => addresses.port, challenge: opts.redirect.challenge, idleTimeoutS: opts.idleTimeoutS });
  const stopWantingCertificates = wantCertificates(opts.wantCertificate, core, domain, registry);
  const undo = () => {
    operatorLayers.stop();
    void listener.stop(true);
    void loopback.stop(true);
    void apex.stop(true);
    direct?.stop(true);
  };
  if (opts.agentPort !== undefined && !directPortAllowed(opts)) {
    log.info("no direct agent port: the edge has no certificate of its own behind an https --public-url");
  } else if (opts.agentPort !== undefined) {
    const hooks = { opened: agents.add.bind(agents), closed: agents.left.bind(agents), admit: budgets.admitAgent("direct"), released: (address: string) => budgets.agents.release(address) };
    direct = listening("--agent-port", opts.agentPort, () => listenDirect({ host: opts.host, port: opts.agentPort!, tls: opts.tls }, edge, hooks), undo);
  }
  if (opts.tlsPort !== undefined) {
    tlsOnly = listening("--tls-port", opts.tlsPort, () => listenTlsOnly(tlsTunnels, { hostname: opts.host, port: opts.tlsPort!, helloTimeoutMs: opts.tlsHelloTimeoutMs }), undo);
    addresses.tlsOnlyPort = tlsOnly.port;
  }

  const stopChores = startChores(core, registry, meter, events);
  const publicUrl = addresses.origin();
  log.info("edge listening", { url: publicUrl, port: listener.port, agent_port: direct?.port ?? "off", tls_port: tlsOnly?.port ?? "off" });
  const watch = budgets.watch({ listener, redirect });

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
      visitorConnections: { http: budgets.visitors.total, tcp: budgets.tcpVisitors.total },
      bytes: { in: meter.totalIn, out: meter.totalOut },
    }),
    agentSide: { context: edge, admit: budgets.admitAgent("ssh"), release: (address) => budgets.agents.release(address), joined: (conn) => agents.add(conn), left: (conn) => agents.left(conn) },
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
            await Promise.all([loopback.stop(force), apex.stop(force)]);
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
        stopTimers: () => {
          stopChores();
          operatorLayers.stop();
        },
        closeLinks: () => nodes?.close(),
        // what the edge's events hold back (a rate limit's count, a refusal being looked up) is said, for the outbox's stop to write
      }).then(() => events.stop()),
  };
}

/** A listener of `flag`'s port, or, when it cannot listen, what did start undone and the error named by its flag. */
function listening<T>(flag: string, port: number, listen: () => T, undo: () => void): T {
  try {
    return listen();
  } catch (err) {
    undo();
    const code = (err as { code?: string }).code;
    throw Object.assign(new Error(`${flag} ${port}: ${(err as Error).message}`), { code });
  }
}
