/**
 * burrow-agent: open a burrow tunnel from a Node.js (20+) or Bun program.
 * These declarations are the package's API; test/sdk/declarations.test.ts
 * checks that the implementation (sdk/src/index.ts) matches them.
 */
import { EventEmitter } from "node:events";

export type Protocol = "http" | "tcp" | "tls" | "udp";

export interface ForwardOptions {
  /** The burrow server, e.g. "https://tunnels.example.com"; else BURROW_SERVER, else what `burrow login` saved. */
  server?: string;
  /** A device token; else BURROW_TOKEN, else what `burrow login` saved. */
  token?: string;
  /** "http" (the default), "tcp", "tls" or "udp". */
  protocol?: Protocol;
  /** The local port (on localhost). */
  port?: number;
  /** The local service as HOST:PORT, or for http a URL (https://localhost:8443 for a TLS service). */
  addr?: string;
  /** http and tls: the name asked for (`<subdomain>.<domain>`). */
  subdomain?: string;
  /** http and tls: a verified custom hostname of the user's. */
  hostname?: string;
  /** tcp and udp: the public port asked for. */
  remotePort?: number;
  /**
   * http, tcp and udp: nothing public; reached only with reach("you/NAME")
   * (or `burrow connect you/NAME`) by you and the users in `share`. Needs
   * `name`; public options (subdomain, hostname, remotePort, access rules)
   * do not go with it.
   */
  private?: boolean;
  /** With `private`: the tunnel's name, 1-63 characters from a-z, 0-9 and -. */
  name?: string;
  /** With `private`: the usernames that may reach it (64 at most). */
  share?: string[];
  /** http: the Host the local service is sent ("rewrite" for its own address, or a name). */
  hostHeader?: string;
  /**
   * http: how the agent speaks to the local service: "http1" (HTTP/1.1, the
   * default), "h2c" (HTTP/2 with prior knowledge, as a gRPC server without
   * TLS wants) or "h2" (HTTP/2 over TLS, for an https:// addr). Visitors'
   * requests and the service's answers, trailers included, are translated
   * both ways.
   */
  upstreamProtocol?: "http1" | "h2c" | "h2";
  /** http, with upstreamProtocol h2c or h2: requests sent at once on the HTTP/2 connection to the service (1-1000, default 256); more wait their turn. */
  upstreamH2MaxConcurrentStreams?: number;
  /** http, with upstreamProtocol h2c or h2: bytes a response's header list may decode to (1024-1048576, default 65536); past it the request is a 502. */
  upstreamH2MaxHeaderList?: number;
  /** http, with upstreamProtocol h2c or h2: response bytes the service may send on a request before the visitor took them (16384-16777216, default 131072). */
  upstreamH2StreamWindow?: number;
  /** http, with upstreamProtocol h2c or h2: bytes of frames the agent may queue while the service does not read (65536-67108864, default 1048576). */
  upstreamH2MaxQueuedControl?: number;
  /** http, with upstreamProtocol h2c or h2: seconds the connection to the service stays open with no request (1-3600, default 30). */
  upstreamH2IdleTimeout?: number;
  /** http, with upstreamProtocol h2c or h2: seconds the service has to send its first SETTINGS (1-300, default 10). */
  upstreamH2SettingsTimeout?: number;
  /** http: seconds the server waits for the local service's answer. */
  responseTimeout?: number;
  /**
   * http: protocols besides WebSocket a request may switch to (Upgrade tokens
   * such as "h2c"); any other Upgrade is taken off the request. What follows
   * a switch is not judged by any rule. At most 16.
   */
  allowUpgrade?: string[];
  /** http: no browser warning page before the first visit (if the user's `skip_warning` allows it). */
  skipWarning?: boolean;
  /** http: visitors sign in with one of these "user:password" pairs. */
  basicAuth?: string[];
  /** Visitors only from these CIDRs (e.g. "10.0.0.0/8"). */
  allowCidr?: string[];
  /** Visitors never from these CIDRs. */
  denyCidr?: string[];
  /** http: visitors sign in with this OpenID Connect provider; the service gets their email in X-Burrow-User-Email. */
  oidc?: { issuer: string; clientId: string; clientSecret: string; allowEmails?: string[] };
  /** http: "Name: value" set on each request to the local service. */
  requestHeaderAdd?: string[];
  /** http: header names removed from each request. */
  requestHeaderRemove?: string[];
  /** http: "Name: value" set on each response to visitors. */
  responseHeaderAdd?: string[];
  /**
   * http, tcp and tls: a traffic policy the server runs on the tunnel's
   * traffic (ngrok's format: rules in CEL with actions), as its YAML or JSON
   * text, or as an object (sent as JSON). The server checks it: a mistake
   * rejects with the server's POLICY_INVALID and the policy's errors (check
   * a file first with `burrow policy check`). At most 128 KiB.
   */
  policy?: string | Record<string, unknown>;
  /** Accept a server certificate that does not verify (a test server). */
  insecure?: boolean;
  /**
   * Reach the server through this proxy: http://, https:// or socks5://
   * (user:password@ in it when the proxy asks). The user's `can_use_proxy`
   * decides whether the server takes a tunnel that comes so. The package reads
   * no HTTPS_PROXY of its own: pass `proxy: process.env.HTTPS_PROXY` for that.
   */
  proxy?: string;
  /** Closes the tunnel when aborted. */
  signal?: AbortSignal;
  /**
   * http: serve the requests with this function instead of a local port
   * (`forward({ handler: app.fetch })` for a Hono, Elysia or any fetch-style
   * app). Its Response's body is streamed; WebSocket upgrades are answered 501.
   */
  handler?: (request: Request) => Response | Promise<Response>;
  /**
   * The request inspector (the `burrow` command's :4040), off by default
   * here: true listens on 127.0.0.1 on any free port (the tunnel's
   * `inspector` says where), or say where and how many requests it keeps.
   * It is the connection's: for a session, give it to connect().
   */
  inspect?: boolean | { host?: string; port?: number; keep?: number };
}

/** A refusal from the server, with its stable code, e.g. SUBDOMAIN_TAKEN, AUTH_FAILED; UNREACHABLE when no server answered. */
export declare class BurrowError extends Error {
  readonly name: "BurrowError";
  readonly code: string;
  constructor(code: string, message: string);
}

/** What the screen shows of each request through an http tunnel. */
export interface RequestInfo {
  method: string;
  path: string;
  /** The status, "101 websocket" for a switch, or "502 (why)" when the local service failed. */
  status: number | string;
  /** Milliseconds from the request's arrival to its answer. */
  duration: number;
}

export interface TunnelEvents {
  request: [RequestInfo];
  /** The connection to the server is down; the next try in `inMs`. */
  reconnecting: [{ why: string; inMs: number; attempt: number }];
  /** Live again after a reconnect. */
  online: [];
  /** Over: closed by close() or the signal (no code), or refused for good (its code). */
  closed: [{ code?: string; message?: string }];
}

export declare class Tunnel extends EventEmitter<TunnelEvents> {
  /** Made by forward(). */
  private constructor();
  /** Where visitors reach it: "https://demo.tunnels.example.com", or "tunnels.example.com:20001" for tcp. */
  url: string;
  /** For tcp and udp: the public port. */
  port?: number;
  /** The request inspector's address, when its session has one (`inspect`). */
  inspector?: string;
  readonly protocol: Protocol;
  /** Closes the tunnel and the connection to the server; the name is free again at once. */
  close(): Promise<void>;
}

export interface ConnectOptions {
  /** The burrow server; else BURROW_SERVER, else what `burrow login` saved. */
  server?: string;
  /** A device token; else BURROW_TOKEN, else what `burrow login` saved. */
  token?: string;
  /** Accept a server certificate that does not verify (a test server). */
  insecure?: boolean;
  /** Reach the server through this proxy (as forward()'s `proxy`). */
  proxy?: string;
  /** The request inspector for every tunnel of the session (as forward()'s `inspect`). */
  inspect?: ForwardOptions["inspect"];
}

/**
 * One connection to the server carrying several tunnels. Tunnels asked for
 * in the same turn go in one handshake; one opened or closed later makes
 * the connection start again with the new list (names and ports kept, a
 * closed one's freed at once): requests in flight on the others are cut.
 */
export declare class Session {
  private constructor();
  /** Opens a tunnel on this session's connection: as forward(), its `server`, `token`, `insecure` and `proxy` the session's. */
  forward(options: ForwardOptions): Promise<Tunnel>;
  /** Closes every tunnel of the session and its connection. */
  close(): Promise<void>;
}

export interface ReachOptions {
  /** The burrow server; else BURROW_SERVER, else what `burrow login` saved. */
  server?: string;
  /** A device token; else BURROW_TOKEN, else what `burrow login` saved. */
  token?: string;
  /** Accept a server certificate that does not verify (a test server). */
  insecure?: boolean;
  /** Reach the server through this proxy (as forward()'s `proxy`). */
  proxy?: string;
  /** The local port to listen on (0: any free one); default: the owner's service port when it is free here, else any. */
  port?: number;
  /** The local address to listen on; default 127.0.0.1. */
  host?: string;
  /** udp: seconds a local sender's flow lasts with no datagram either way (default 60). */
  udpIdle?: number;
  /** udp: flows at once; past it the least recently active ends (default 256). */
  udpFlows?: number;
  /** Closes the local port and the connection when aborted. */
  signal?: AbortSignal;
}

export interface ReachedEvents {
  /** A local connection was carried, or closed at once (`opened` false) while the owner's agent was away. */
  connection: [{ remote: string; opened: boolean }];
  /** The connection to the server is down, or the owner's agent is away (`why` "TUNNEL_OFFLINE"); the next try in `inMs`. */
  reconnecting: [{ why: string; inMs: number; attempt: number }];
  /** Reached again after that. */
  online: [];
  /** Over: closed by close() or the signal (no code), or refused for good (its code, e.g. NOT_SHARED). */
  closed: [{ code?: string; message?: string }];
}

/** A private tunnel reached through a local port: connect your client to `host`:`port` (an http one's address is `url`). */
export declare class Reached extends EventEmitter<ReachedEvents> {
  private constructor();
  /** OWNER/NAME, as asked for. */
  readonly target: string;
  /** The private tunnel's kind: a TCP port here for http and tcp, a UDP port for udp. */
  readonly protocol: "http" | "tcp" | "udp";
  readonly host: string;
  readonly port: number;
  /** http: "http://127.0.0.1:<port>". */
  readonly url?: string;
  /** Closes the local port and the connection to the server. */
  close(): Promise<void>;
}

/**
 * Reaches a private tunnel shared with you ("alice/db"), as `burrow connect`
 * does: resolves once the local port listens; rejects with a BurrowError
 * (NOT_SHARED, for a tunnel that does not exist or is not shared with you).
 * While the owner's agent is away it waits, saying so with "reconnecting".
 */
export declare function reach(target: string, options?: ReachOptions): Promise<Reached>;

/** One connection to the server for several tunnels; throws a TypeError when there is no server or token to use. */
export declare function connect(options?: ConnectOptions): Session;

/**
 * Opens a tunnel to a local service (or a handler) on a connection of its
 * own; resolves once it is live (rejects with a BurrowError carrying the
 * refusal's code). Afterwards it reconnects as the `burrow` command does,
 * and says so with "reconnecting" and "online".
 */
export declare function forward(options: ForwardOptions): Promise<Tunnel>;
