import type { ConnectOptions, RuntimeSocket } from "../runtime/types.ts";
import type { Http2ClientLimits } from "../http2/client-limits.ts";

/**
 * Another way to a local service than a TCP connection from this process,
 * shaped as the runtime's connect: the SSH gateway's, where the service is
 * behind the client's `ssh -R` and each connection is a channel to it.
 */
export interface Dialer {
  /** Sets its connections apart from any other way's to the same host and port (the keep-alive pool's key). */
  readonly key: string;
  connect<T>(options: ConnectOptions<T>): Promise<RuntimeSocket<T>>;
}

/** Where a tunnel's local service is: what the agent connects to for each visitor. */
export interface LocalTarget {
  host: string;
  port: number;
  /** --host-header: undefined keeps the visitor's Host, "rewrite" uses the local address, anything else is used as is. */
  hostHeader?: string;
  /** https to the local service (for a target given as https://host:port). */
  tls?: boolean;
  /** http: the service speaks HTTP/2 (--upstream-protocol): h2c with prior knowledge, or h2 over TLS; undefined: HTTP/1.1. */
  upstreamProtocol?: "h2c" | "h2";
  /** http, with upstreamProtocol: the HTTP/2 connection's limits (--upstream-h2-*); undefined: the defaults. */
  upstreamH2?: Http2ClientLimits;
  /** tcp: each connection to the local service starts with a PROXY protocol v2 header naming the visitor (--proxy-protocol). */
  proxyProtocol?: boolean;
  /** http: other local services by path prefix, longest first (--route, agent/routes.ts); the rest comes here. */
  routes?: { prefix: string; target: LocalTarget }[];
  /** http: the protocols besides websocket a request may switch to (--allow-upgrade, lower case; http/upgrade.ts). */
  allowUpgrade?: ReadonlySet<string>;
  /** How a connection to it is made; undefined: a TCP (or TLS) connection to host:port. */
  dial?: Dialer;
  /** http: a function in this process serves the requests instead (burrow-agent's `handler`; agent/handler-stream.ts): no local port. */
  handler?: (request: Request) => Response | Promise<Response>;
}

/** The target as a Host value names it: "127.0.0.1:3000", "[::1]:3000". */
export const localAuthority = (t: LocalTarget) => `${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}`;

/** Why the local service could not be reached, in a few words for the 502 page and the log. */
export function describeLocalError(err: unknown): string {
  const code = (err as { code?: string } | undefined)?.code;
  if (code === "ConnectionRefused" || code === "ECONNREFUSED") return "connection refused";
  if (code === "ETIMEDOUT" || code === "TimeoutError") return "timed out";
  return (err as Error | undefined)?.message?.split("\n")[0]?.slice(0, 120) || "request failed";
}
