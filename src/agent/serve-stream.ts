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
import type { RequestTaps } from "./inspector/tap.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { serveTcpStream } from "./tcp.ts";
import { serveWebSocketStream } from "./websocket.ts";

/** `inspector`: where HTTP requests and WebSockets of tunnels with `inspect` on are captured, when it runs. */
export function serveStream(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput, inspector?: RequestTaps): void {
  const target = tunnel.target;
  const name = tunnel.name;
  const started = performance.now();
  // every stream that was opened for the output ends for it exactly once, whichever way it ends
  // (an exception included), so that its count of what is open stays true
  let ended = !(meta.kind === "tcp" || ((meta.kind === "http" || meta.kind === "ws") && meta.head));
  const end = (reason?: string) => {
    if (ended) return;
    ended = true;
    const ms = performance.now() - started;
    if (meta.kind === "http") out.request({ tunnel: name, method: meta.head?.method ?? "?", path: meta.head?.path ?? "?", status: `502 (${reason})`, ms });
    else if (meta.kind === "ws") out.webSocketClosed?.({ tunnel: name, path: meta.head?.path ?? "?", ms, opened: false });
    else out.connection({ tunnel: name, remote: meta.remote, event: "close", ms, error: reason });
  };
  const failed = (err: unknown) => {
    const reason = String((err as Error)?.message ?? err).slice(0, 100);
    stream.reset(`${WireError.UPSTREAM_FAILED} ${reason}`);
    end(reason);
  };
  if (!ended) out.streamOpened?.({ tunnel: name, kind: meta.kind as "http" | "ws" | "tcp" });
  try {
    const tap = meta.kind !== "tcp" ? inspector?.begin(tunnel, meta) : undefined;
    if (meta.kind === "http" && meta.head) {
      serveHttpStream(stream, meta, target, (line) => {
        ended = true;
        out.request({ tunnel: name, ...line });
      }, undefined, tap).catch(failed);
    } else if (meta.kind === "ws" && meta.head) {
      const path = meta.head.path;
      serveWebSocketStream(
        stream,
        meta,
        target,
        () => out.request({ tunnel: name, method: "GET", path, status: "101 websocket", ms: performance.now() - started, kind: "ws" }),
        (opened) => {
          if (ended) return;
          ended = true;
          out.webSocketClosed?.({ tunnel: name, path, ms: performance.now() - started, opened });
        },
        tap,
      );
    } else if (meta.kind === "tcp") {
      out.connection({ tunnel: name, remote: meta.remote, event: "open" });
      serveTcpStream(stream, target, (b, error) => {
        if (ended) return;
        ended = true;
        out.connection({ tunnel: name, remote: meta.remote, event: "close", bytesIn: b.in, bytesOut: b.out, ms: performance.now() - started, error });
      }).catch(failed);
    } else {
      stream.reset(WireError.PROTOCOL_ERROR);
    }
  } catch (err) {
    failed(err);
  }
}
