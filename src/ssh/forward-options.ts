/**
 * The options an SSH session's remote command gives its forwards
 * (`ssh -R demo:80:localhost:3000 host --basic-auth me:pw --skip-warning`):
 * the flags of `burrow http|tcp|tls` that make sense here, read by the
 * command line's own code (cli/ssh-options.ts hands the reader in, so the
 * words are the CLI's), and applied to each forward by its kind. The
 * gateway only asks.
 */
import type { TunnelRequest } from "../protocol/messages.ts";

/** What a forward asks, before the options: its kind and the name or port its `-R` gave. */
export interface ForwardAsk {
  kind: "http" | "tcp" | "tls";
  /** The -R address's name: a subdomain, or a custom hostname (with dots); a private tunnel's name with --private. */
  name?: string;
  /** tcp: the port asked for (-R N:...), 0 for any. */
  port: number;
}

/** A forward's tunnel with the options applied: its HELLO request, and what its streams are served with. */
export interface OptionedForward {
  request: TunnelRequest;
  /** --host-header: the Host its service is sent. */
  hostHeader?: string;
  /** --proxy-protocol: each connection starts with a PROXY protocol v2 header naming the visitor. */
  proxyProtocol?: boolean;
  /** --upstream-protocol h2c: the service is spoken to in HTTP/2 without TLS, over one channel (h2 would need TLS, which a channel does not carry). */
  upstreamProtocol?: "h2c";
}

export interface ForwardOptions {
  /** The options said nothing: each forward is asked for as its -R says. */
  readonly none: boolean;
  /** The tunnel `ask` becomes with the options, or the CLI's words for why it cannot. */
  apply(ask: ForwardAsk): OptionedForward | { problem: string };
}

/** Reads a session's remote command into options, or the CLI's words for what is wrong with it. */
export type ForwardOptionsReader = (command: string) => ForwardOptions | { problem: string };
