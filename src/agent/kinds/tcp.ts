/**
 * A tcp tunnel on the agent's side: each "tcp" stream a visitor's
 * connection, its bytes both ways to the local service (tcp.ts), with a
 * PROXY protocol header first when the tunnel asks for one; and its
 * request from the spec (a port or private, a pool, IP rules).
 */
import type { OpenMeta, TcpAccess } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import { parseEndpoint, proxyV2Header } from "../../sockets/proxy-protocol.ts";
import type { AgentOutput, TunnelView } from "../output.ts";
import { compactAccess } from "../settings/tunnel-options.ts";
import { serveTcpStream } from "../tcp.ts";
import type { AgentKind } from "./unit.ts";

export const TCP_AGENT: AgentKind = {
  urlTarget: false,
  serve: serveConnection,
  tunnel(spec, { target, ip, priv, pooled, health }) {
    const access = compactAccess<TcpAccess>(ip);
    if (priv) return { request: { protocol: "tcp", private: priv, ...(access ? { access } : {}) }, target, inspect: false };
    return { request: { protocol: "tcp", port: spec.remotePort, ...pooled, ...(access ? { access } : {}) }, target, inspect: false, ...health };
  },
};

/** A visitor's connection (a tcp stream, or a tls one: its bytes as they came), to the local service, the output told when it opens and once when it ends. */
export function serveConnection(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput): void {
  const name = tunnel.name;
  const started = performance.now();
  const ms = () => performance.now() - started;
  // the connection ends for the output exactly once, whichever way it ends (an exception included)
  let ended = false;
  const end = (reason: string, bytes?: { in: number; out: number }) => {
    if (ended) return;
    ended = true;
    out.connection({ tunnel: name, remote: meta.remote, event: "close", ...(bytes ? { bytesIn: bytes.in, bytesOut: bytes.out } : {}), ms: ms(), error: reason });
  };
  const failed = (err: unknown) => {
    const reason = String((err as Error)?.message ?? err).slice(0, 100);
    stream.reset(`${WireError.UPSTREAM_FAILED} ${reason}`);
    end(reason);
  };
  try {
    out.streamOpened?.({ tunnel: name, kind: "tcp" });
    out.connection({ tunnel: name, remote: meta.remote, event: "open" });
    serveTcpStream(stream, tunnel.target, proxyHeaderFor(meta, tunnel), (b, error) => {
      if (ended) return;
      ended = true;
      out.connection({ tunnel: name, remote: meta.remote, event: "close", bytesIn: b.in, bytesOut: b.out, ms: ms(), error });
    }).catch(failed);
  } catch (err) {
    failed(err);
  }
}

/**
 * The PROXY protocol header a tcp tunnel with --proxy-protocol sends first:
 * the visitor's address from OPEN, and the one it reached (OPEN's `local`;
 * from an older edge without it, the tunnel's public port on an unspecified
 * address of the visitor's family).
 */
function proxyHeaderFor(meta: OpenMeta, tunnel: TunnelView): Uint8Array | undefined {
  if (!tunnel.target.proxyProtocol) return undefined;
  const source = parseEndpoint(meta.remote);
  if (!source) return undefined;
  const reached = meta.local === undefined ? undefined : parseEndpoint(meta.local);
  const destination = reached ?? { address: source.address.includes(":") ? "::" : "0.0.0.0", port: tunnel.port ?? 0 };
  return proxyV2Header(source, destination);
}
