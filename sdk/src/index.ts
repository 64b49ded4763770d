/**
 * burrow-agent: burrow's agent as a library, for Node.js 20+ and Bun. The
 * same agent the `burrow` executable runs (src/agent/client.ts), with the
 * runtime picked at load: Bun's own sockets on Bun, node:net, node:tls,
 * node:dgram and `ws` on Node.js (src/runtime/).
 *
 *   const tunnel = await forward({ port: 3000, subdomain: "demo" });
 *   tunnel.url; // "https://demo.tunnels.example.com"
 *   await tunnel.close();
 */
import { EventEmitter } from "node:events";
import { Agent, type AgentTunnel } from "../../src/agent/client.ts";
import type { AgentOutput, ReadyView, RequestEvent } from "../../src/agent/output.ts";
import { resolveCredentials } from "../../src/agent/settings/server-and-token.ts";
import { parseHostHeader, parseRemotePort, parseResponseTimeout, parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import type { TunnelRequest } from "../../src/protocol/messages.ts";
import { useRuntime } from "../../src/runtime/current.ts";
import { nodeRuntime } from "../../src/runtime/node.ts";

// on Node.js, the agent's sockets, WebSocket and UDP are Node's (Bun's are the default)
if (typeof (globalThis as { Bun?: unknown }).Bun === "undefined") useRuntime(nodeRuntime);

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
  /** http: the Host the local service is sent ("rewrite" for its own address, or a name). */
  hostHeader?: string;
  /** http: seconds the server waits for the local service's answer. */
  responseTimeout?: number;
  /** http: no browser warning page before the first visit (if the user's `skip_warning` allows it). */
  skipWarning?: boolean;
  /** http: visitors sign in with one of these "user:password" pairs. */
  basicAuth?: string[];
  /** Visitors only from these CIDRs (e.g. "10.0.0.0/8"). */
  allowCidr?: string[];
  /** Visitors never from these CIDRs. */
  denyCidr?: string[];
  /** Accept a server certificate that does not verify (a test server). */
  insecure?: boolean;
  /** Closes the tunnel when aborted. */
  signal?: AbortSignal;
  /**
   * http: serve the requests with this function instead of a local port
   * (`forward({ handler: app.fetch })` for a Hono, Elysia or any fetch-style
   * app). Its Response's body is streamed; WebSocket upgrades are answered 501.
   */
  handler?: (request: Request) => Response | Promise<Response>;
}

/** A refusal from the server, with its stable code (docs/reference/codes.md), e.g. SUBDOMAIN_TAKEN. */
export class BurrowError extends Error {
  override readonly name = "BurrowError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
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

export class Tunnel extends EventEmitter<TunnelEvents> {
  /** Where visitors reach it: "https://demo.tunnels.example.com", or "tunnels.example.com:20001" for tcp. */
  url = "";
  /** For tcp and udp: the public port. */
  port?: number;
  readonly protocol: Protocol;
  private stopping = false;

  /** @internal */
  constructor(
    protocol: Protocol,
    private readonly agent: Agent,
    private readonly done: Promise<number>,
  ) {
    super();
    this.protocol = protocol;
  }

  /** Closes the tunnel and the connection to the server; the name is free again at once. */
  async close(): Promise<void> {
    this.stopping = true;
    this.agent.stop();
    await this.done;
  }

  /** @internal */
  get closing(): boolean {
    return this.stopping;
  }
}

function tunnelRequest(o: ForwardOptions, protocol: Protocol): TunnelRequest {
  const access = {
    ...(o.basicAuth?.length ? { basicAuth: o.basicAuth } : {}),
    ...(o.allowCidr?.length ? { allowCidrs: o.allowCidr } : {}),
    ...(o.denyCidr?.length ? { denyCidrs: o.denyCidr } : {}),
  };
  const hasAccess = Object.keys(access).length > 0;
  const remotePort = o.remotePort === undefined ? undefined : parseRemotePort(String(o.remotePort));
  switch (protocol) {
    case "http":
      return {
        protocol,
        ...(o.subdomain !== undefined ? { subdomain: o.subdomain } : {}),
        ...(o.hostname !== undefined ? { hostname: o.hostname } : {}),
        ...(o.responseTimeout !== undefined ? { responseTimeout: parseResponseTimeout(String(o.responseTimeout)) } : {}),
        ...(o.skipWarning ? { skipWarning: true } : {}),
        ...(hasAccess ? { access } : {}),
      } as TunnelRequest;
    case "tls":
      return { protocol, ...(o.subdomain !== undefined ? { subdomain: o.subdomain } : {}), ...(o.hostname !== undefined ? { hostname: o.hostname } : {}), ...(hasAccess ? { access } : {}) } as TunnelRequest;
    case "tcp":
    case "udp":
      if (o.basicAuth?.length) throw new TypeError(`basicAuth is for http tunnels, not ${protocol}`);
      return { protocol, ...(remotePort !== undefined ? { port: remotePort } : {}), ...(hasAccess ? { access } : {}) } as TunnelRequest;
  }
}

/**
 * Opens a tunnel to a local service; resolves once it is live (rejects with
 * a BurrowError carrying the refusal's code). Afterwards it reconnects as
 * the `burrow` command does, and says so with "reconnecting" and "online".
 */
export function forward(options: ForwardOptions): Promise<Tunnel> {
  const protocol: Protocol = options.protocol ?? "http";
  if (!["http", "tcp", "tls", "udp"].includes(protocol)) return Promise.reject(new TypeError(`protocol must be http, tcp, tls or udp, not ${String(protocol)}`));
  if (options.signal?.aborted) return Promise.reject(options.signal.reason ?? new Error("aborted"));
  let target: AgentTunnel["target"];
  let request: TunnelRequest;
  let creds: { server: string; token: string };
  try {
    const where = options.addr ?? (options.port !== undefined ? String(options.port) : undefined);
    if (options.handler !== undefined) {
      if (typeof options.handler !== "function") throw new TypeError("handler must be a function (request: Request) => Response");
      if (protocol !== "http") throw new TypeError(`a handler serves http tunnels, not ${protocol}`);
      if (where !== undefined) throw new TypeError("give a handler or a port (or addr), not both");
      // no local port: the agent hands each request to the function (src/agent/handler-stream.ts)
      target = { host: "localhost", port: 0, handler: options.handler };
    } else {
      if (where === undefined) throw new TypeError("forward() needs port, addr or handler");
      target = parseTarget(where, protocol === "http");
    }
    if (options.hostHeader !== undefined) target.hostHeader = parseHostHeader(options.hostHeader);
    request = tunnelRequest(options, protocol);
    creds = resolveCredentials({ server: options.server, token: options.token });
  } catch (err) {
    return Promise.reject(err);
  }
  return new Promise((resolve, reject) => {
    let tunnel: Tunnel | undefined;
    let live = false;
    let refusal: BurrowError | undefined;
    const out: AgentOutput = {
      ready(r: ReadyView) {
        const t = r.tunnels[0];
        if (!tunnel || !t) return;
        tunnel.url = t.url;
        if (t.port !== undefined) tunnel.port = t.port;
        if (!live) {
          live = true;
          resolve(tunnel);
        } else tunnel.emit("online");
      },
      request(e: RequestEvent) {
        tunnel?.emit("request", { method: e.method, path: e.path, status: e.status, duration: e.ms });
      },
      connection() {},
      reconnecting(why, inMs, attempt) {
        // before it was ever live, a server that cannot be reached is the caller's to hear of
        if (!live && attempt >= 1) {
          refusal = new BurrowError("UNREACHABLE", why);
          agent.stop();
          return;
        }
        tunnel?.emit("reconnecting", { why, inMs, attempt });
      },
      refused(code, message) {
        refusal = new BurrowError(code, message);
      },
      tunnelRefused(_name, code, message) {
        refusal = new BurrowError(code, message);
      },
    };
    const agent = new Agent({ server: creds.server, token: creds.token, insecure: Boolean(options.insecure), tunnels: [{ name: protocol, request, target, inspect: false }], out });
    const done = agent.run();
    tunnel = new Tunnel(protocol, agent, done);
    const onAbort = () => void tunnel!.close();
    options.signal?.addEventListener("abort", onAbort, { once: true });
    done.then(
      () => {
        options.signal?.removeEventListener("abort", onAbort);
        if (!live) return reject(refusal ?? new BurrowError("CLOSED", "the tunnel closed before it was live"));
        tunnel!.emit("closed", tunnel!.closing || !refusal ? {} : { code: refusal.code, message: refusal.message });
      },
      (err) => (live ? tunnel!.emit("closed", { code: "FAILED", message: String(err) }) : reject(err)),
    );
  });
}
