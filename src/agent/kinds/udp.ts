/**
 * A udp tunnel on the agent's side: each "udp" stream a visitor's flow,
 * its datagrams both ways through a connected UDP socket of its own
 * (udp.ts), so that the service's replies go back on the flow they belong
 * to; its request from the spec: a port or private, IP rules.
 */
import type { OpenMeta, TcpAccess } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import type { AgentOutput, TunnelView } from "../output.ts";
import { compactAccess } from "../settings/tunnel-options.ts";
import { serveUdpFlow } from "../udp.ts";
import type { AgentKind } from "./unit.ts";

export const UDP_AGENT: AgentKind = {
  urlTarget: false,
  serve: serveFlow,
  tunnel(spec, { target, ip, priv }) {
    const access = compactAccess<TcpAccess>(ip);
    return { request: { protocol: "udp", ...(priv ? { private: priv } : { port: spec.remotePort }), ...(access ? { access } : {}) }, target, inspect: false };
  },
};

/** A udp flow: its datagrams both ways, the output told when it opens and when it ends. */
function serveFlow(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput): void {
  const started = performance.now();
  out.streamOpened?.({ tunnel: tunnel.name, kind: "udp" });
  const counts = serveUdpFlow(stream, tunnel.target, (ended, error) => {
    out.flow?.({ tunnel: tunnel.name, remote: meta.remote, event: "close", ...ended, ms: performance.now() - started, ...(error ? { error } : {}) });
  });
  out.flow?.({ tunnel: tunnel.name, remote: meta.remote, event: "open", live: counts });
}
