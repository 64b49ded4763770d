/**
 * What the edge is started with (EdgeOptions: the server's settings, and
 * what the rest of the server plugs in: certificates, other nodes, the
 * apex's app) and what a started edge gives back (RunningEdge). The wiring
 * is server.ts.
 */
import type { AdmissionHook } from "../webhooks/admission-hook.ts";
import type { Core } from "../core/index.ts";
import type { ActiveTunnel } from "../core/live.ts";
import type { TrustedProxies } from "../http/addresses.ts";
import type { Http2Limits } from "../http2/limits.ts";
import type { EdgeCounters } from "../metrics/edge-counters.ts";
import type { LiveNumbers } from "../metrics/registry.ts";
import type { Passthrough } from "../sockets/tls-visit.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { TlsSource } from "../tls/tls-source.ts";
import type { EdgeContext } from "./agent-context.ts";
import type { AgentConnection } from "./agents.ts";
import type { OtherNodes } from "./other-nodes.ts";
import type { Registry } from "./registry.ts";
import type { EdgePolicyOptions } from "./traffic-policy/edge-policies.ts";

export interface EdgeOptions {
  core: Core;
  domain: string;
  /** --region: this node's region, the traffic policies' conn.server_region (traffic-policy/node-region.ts); absent or empty: none. */
  region?: string;
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
  /** Traffic policies' caps and rate-limit buckets (--policy-*); `connectMaxBytes`: what a tcp or tls visitor may send while its on_tcp_connect runs (the connection doors', tcp.ts). */
  policy?: Pick<EdgePolicyOptions, "limits" | "rateLimitBuckets" | "compileBudgetMs" | "body" | "rateLimits" | "jwks" | "geoip" | "compiledKept" | "httpRequest"> & { connectMaxBytes?: number; reloadMs?: number };
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
  /**
   * HTTP/2 for visitors: offered by ALPN on the public port with TLS
   * (--h2; the domain itself excepted), taken with prior knowledge on a
   * plain one (--h2-prior-knowledge), each connection held to `limits`.
   * None: HTTP/1.1 only.
   */
  http2?: { alpn: boolean; priorKnowledge: boolean; limits: Http2Limits };
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
  /** --admission-hook: asked before a handshake's tunnels go live. */
  admissionHook?: AdmissionHook;
  /** This node's name in events (--node-id); default "local". */
  nodeName?: string;
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
  /**
   * What another way in for agents works with (the SSH gateway, ssh/): the
   * agents' context, and a place in their connection budget for each of
   * its connections.
   */
  agentSide: {
    context: EdgeContext;
    admit(address: string): boolean;
    release(address: string): void;
    /** Its agents' sessions, among the edge's (drained, told SERVER_SHUTDOWN at a stop): joined, and gone. */
    joined(conn: AgentConnection): void;
    left(conn: AgentConnection): void;
  };
  /** Whether the public port and the direct port (when there is one) accept connections now. */
  listening(): { edge: boolean; agents: boolean };
  stop(): Promise<void>;
}
