/**
 * What an `ssh -R` asks for, as the tunnel burrow opens for it. OpenSSH
 * sends a `tcpip-forward` with the address and port to listen on; the
 * gateway reads them as a tunnel:
 *
 *   -R demo:80:localhost:3000          http tunnel "demo" (a name with dots: a custom hostname)
 *   -R 80:localhost:3000               http tunnel, a random name
 *   -R vault:443:localhost:8443        tls tunnel "vault", passed through undecrypted
 *   -R 0:localhost:5432                tcp tunnel, a port from --tcp-ports ("Allocated port N")
 *   -R 20005:localhost:5432            tcp tunnel on port 20005, if free
 *   -R db:5432:localhost:5432 ... --private   private tcp tunnel "db" (the options: forward-options.ts)
 *
 * The address OpenSSH sends without one ("localhost", or "" with
 * GatewayPorts) names nothing. The `-R` target (localhost:3000) never
 * reaches the server: the client connects to it for each channel.
 */
import type { ForwardAsk, ForwardOptions, OptionedForward } from "./forward-options.ts";

/** The port that asks for an http tunnel, and the one for a tls tunnel. */
export const HTTP_PORT = 80;
export const TLS_PORT = 443;

/** Bind addresses that name no tunnel: what OpenSSH sends when -R gives none, and the wildcards. */
const UNNAMED: ReadonlySet<string> = new Set(["", "localhost", "*", "0.0.0.0", "::", "127.0.0.1", "::1"]);

/** What `bindAddr`:`bindPort` asks for, before any option. */
export function forwardAsk(bindAddr: string, bindPort: number): ForwardAsk | { refused: string } {
  if (bindPort > 65535) return { refused: `port ${bindPort} is not a port` };
  const name = UNNAMED.has(bindAddr) ? undefined : bindAddr.toLowerCase();
  const kind = bindPort === HTTP_PORT ? "http" : bindPort === TLS_PORT ? "tls" : "tcp";
  return { kind, ...(name !== undefined ? { name } : {}), port: bindPort };
}

/** The tunnel a `tcpip-forward` asks for with the session's options, or why it cannot be one (said to the user as is). */
export function forwardRequest(bindAddr: string, bindPort: number, options: ForwardOptions): OptionedForward | { refused: string } {
  const ask = forwardAsk(bindAddr, bindPort);
  if ("refused" in ask) return ask;
  const made = options.apply(ask);
  return "problem" in made ? { refused: made.problem } : made;
}

/**
 * The options of a server that reads none (the gateway started without
 * the command line's reader): an empty command, each forward as its -R
 * says.
 */
export function bareOptions(command: string): ForwardOptions | { problem: string } {
  if (command.trim() !== "") return { problem: "this server takes no options after the host" };
  return {
    none: true,
    apply(ask) {
      const names = ask.name === undefined ? {} : ask.name.includes(".") ? { hostname: ask.name } : { subdomain: ask.name };
      if (ask.kind === "http") return { request: { protocol: "http", ...names, skipWarning: false } };
      if (ask.kind === "tls") return { request: { protocol: "tls", ...names } };
      if (ask.name !== undefined) return { problem: `'${ask.name}': a tcp tunnel has no name; -R 0:HOST:PORT for any port (--private names one)` };
      return { request: { protocol: "tcp", ...(ask.port !== 0 ? { port: ask.port } : {}) } };
    },
  };
}

/** How a forward is written back to its user: "demo:80", "80", "0". */
export function forwardLabel(bindAddr: string, bindPort: number): string {
  return UNNAMED.has(bindAddr) ? String(bindPort) : `${bindAddr}:${bindPort}`;
}
