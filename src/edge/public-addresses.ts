/**
 * Where visitors reach the edge and each tunnel, as READY, the portal and
 * the log name them: the edge's own scheme and port, unless a proxy in
 * front says otherwise (--public-url).
 */
import type { ActiveTunnel } from "../core/live.ts";
import type { TunnelKind } from "../protocol/kinds.ts";
import type { KindAddresses } from "./kinds/edge-kind.ts";
import { EDGE_KINDS } from "./kinds/index.ts";

/** A tunnel's name as visitors write it: a subdomain under the domain, a custom hostname (it has dots) as it is. */
export const fullName = (name: string, domain: string) => (name.includes(".") ? name : `${name}.${domain}`);

export type { KindAddresses };

/** Where visitors reach a public tunnel of `kind`; undefined for a tls tunnel when no port passes names through. */
export function kindAddress(at: KindAddresses, kind: TunnelKind, name: string, port: number): string | undefined {
  return EDGE_KINDS[kind].address(at, name, port);
}

export class PublicAddresses {
  readonly scheme: "http" | "https";
  /** Visitors see https (the edge's TLS, or a proxy's). */
  readonly secure: boolean;
  /** The port visitors use: the proxy's, or the public port's (set once it listens). */
  port: number;
  /** The port for tls tunnels only, once it listens. */
  tlsOnlyPort?: number;
  /** The public port has TLS of its own: tls tunnels pass through it by name. */
  private readonly tlsOnPublicPort: boolean;

  constructor(
    private readonly domain: string,
    opts: { publicUrl?: { scheme: "http" | "https"; port: number }; tls: boolean; port: number },
  ) {
    this.tlsOnPublicPort = opts.tls;
    this.scheme = opts.publicUrl?.scheme ?? (opts.tls ? "https" : "http");
    this.secure = this.scheme === "https";
    this.port = opts.publicUrl?.port ?? opts.port;
  }

  private suffix(): string {
    return this.port === (this.secure ? 443 : 80) ? "" : `:${this.port}`;
  }

  /** The domain's own address, e.g. https://tunnels.example.com */
  origin(): string {
    return `${this.scheme}://${this.domain}${this.suffix()}`;
  }

  /** An http tunnel's: a name with dots is a custom hostname, reached as it is; a subdomain is under the domain. */
  httpUrl(name: string): string {
    return `${this.scheme}://${fullName(name, this.domain)}${this.suffix()}`;
  }

  tcpAddress(port: number): string {
    return `${this.domain}:${port}`;
  }

  udpAddress(port: number): string {
    return `udp://${this.domain}:${port}`;
  }

  /** A tls tunnel's: by name on the public port when it has TLS, else on --tls-port; undefined when neither passes names through. */
  tlsAddress(name: string): string | undefined {
    if (this.tlsOnPublicPort) return `tls://${fullName(name, this.domain)}${this.port === 443 ? "" : `:${this.port}`}`;
    return this.tlsOnlyPort !== undefined ? `tls://${fullName(name, this.domain)}:${this.tlsOnlyPort}` : undefined;
  }

  /** Where a live tunnel is reached, as READY told its agent. */
  addressOf(t: ActiveTunnel): string {
    if (t.private) return t.private.target;
    return kindAddress(this, t.protocol, t.hostname ?? t.subdomain ?? "", t.port ?? 0) ?? "";
  }
}
