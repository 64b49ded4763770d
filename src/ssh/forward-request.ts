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
 *
 * The address OpenSSH sends without one ("localhost", or "" with
 * GatewayPorts) names nothing. The `-R` target (localhost:3000) never
 * reaches the server: the client connects to it for each channel.
 */
import type { TunnelRequest } from "../protocol/messages.ts";

/** The port that asks for an http tunnel, and the one for a tls tunnel. */
export const HTTP_PORT = 80;
export const TLS_PORT = 443;

/** Bind addresses that name no tunnel: what OpenSSH sends when -R gives none, and the wildcards. */
const UNNAMED: ReadonlySet<string> = new Set(["", "localhost", "*", "0.0.0.0", "::", "127.0.0.1", "::1"]);

export type ForwardAsked = { request: TunnelRequest; name?: string } | { refused: string };

/** The tunnel a `tcpip-forward` for `bindAddr`:`bindPort` asks for, or why it asks for none (said to the user as is). */
export function forwardRequest(bindAddr: string, bindPort: number): ForwardAsked {
  const name = UNNAMED.has(bindAddr) ? undefined : bindAddr.toLowerCase();
  const names = name === undefined ? {} : name.includes(".") ? { hostname: name } : { subdomain: name };
  if (bindPort === HTTP_PORT) return { request: { protocol: "http", ...names, skipWarning: false }, name };
  if (bindPort === TLS_PORT) return { request: { protocol: "tls", ...names }, name };
  if (name !== undefined) {
    return { refused: `'${bindAddr}:${bindPort}': only an http tunnel (port 80) or a tls tunnel (port 443) has a name; a tcp tunnel is reached by its port: -R 0:HOST:PORT` };
  }
  if (bindPort > 65535) return { refused: `port ${bindPort} is not a port` };
  return { request: { protocol: "tcp", ...(bindPort !== 0 ? { port: bindPort } : {}) } };
}

/** How a forward is written back to its user: "demo:80", "80", "0". */
export function forwardLabel(bindAddr: string, bindPort: number): string {
  return UNNAMED.has(bindAddr) ? String(bindPort) : `${bindAddr}:${bindPort}`;
}
