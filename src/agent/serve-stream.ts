/**
 * One stream the edge opened, served by the kind it is: an HTTP request, a
 * WebSocket, or a TCP connection, each to its tunnel's local service. One
 * visitor's failure (a header the platform refuses, a local socket error)
 * ends that stream, never the agent.
 */
import type { OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { serveHttpStream } from "./http.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { serveTcpStream } from "./tcp.ts";
import { serveWebSocketStream } from "./websocket.ts";

export function serveStream(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput): void {
  const target = tunnel.target;
  const name = tunnel.name;
  const failed = (err: unknown) => stream.reset(`${WireError.UPSTREAM_FAILED} ${String((err as Error)?.message ?? err).slice(0, 100)}`);
  try {
    if (meta.kind === "http" && meta.head) {
      serveHttpStream(stream, meta, target, (line) => out.request({ tunnel: name, ...line })).catch(failed);
    } else if (meta.kind === "ws" && meta.head) {
      serveWebSocketStream(stream, meta, target, () => out.request({ tunnel: name, method: "GET", path: meta.head!.path, status: "101 websocket", ms: 0 }));
    } else if (meta.kind === "tcp") {
      out.connection({ tunnel: name, remote: meta.remote, event: "open" });
      serveTcpStream(stream, target, (b) => out.connection({ tunnel: name, remote: meta.remote, event: "close", bytesIn: b.in, bytesOut: b.out })).catch(failed);
    } else {
      stream.reset(WireError.PROTOCOL_ERROR);
    }
  } catch (err) {
    failed(err);
  }
}
