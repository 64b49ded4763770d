/**
 * One stream the edge opened, served by the kind it is: an HTTP request
 * ("h1", a WebSocket being one that switches protocols) or a TCP
 * connection, each to its tunnel's local service. One visitor's failure (a
 * head the agent cannot read, a local socket error) ends that stream, never
 * the agent.
 */
import type { OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { serveHttpStream } from "./http.ts";
import type { RequestTaps } from "./inspector/tap.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { serveTcpStream } from "./tcp.ts";

/** `inspector`: where HTTP requests and WebSockets of tunnels with `inspect` on are captured, when it runs. */
export function serveStream(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput, inspector?: RequestTaps): void {
  const name = tunnel.name;
  const started = performance.now();
  // every stream that was opened for the output ends for it exactly once, whichever way it ends
  // (an exception included), so that its count of what is open stays true: this is what says so
  // if nothing else does
  let ending: ((reason: string) => void) | undefined;
  const failed = (err: unknown) => {
    const reason = String((err as Error)?.message ?? err).slice(0, 100);
    stream.reset(`${WireError.UPSTREAM_FAILED} ${reason}`);
    const end = ending;
    ending = undefined;
    end?.(reason);
  };
  try {
    if (meta.kind === "h1" && meta.head !== undefined) {
      serveHttpStream(stream, meta.head, tunnel.target, {
        opened: (kind, method, path) => {
          out.streamOpened?.({ tunnel: name, kind });
          ending = (reason) => out.request({ tunnel: name, method, path, status: `502 (${reason})`, ms: performance.now() - started });
        },
        log: (line) => {
          ending = line.kind === "ws" ? () => out.webSocketClosed?.({ tunnel: name, path: line.path, ms: performance.now() - started, opened: true }) : undefined;
          out.request({ tunnel: name, ...line });
        },
        switchedClosed: (path, ms) => {
          ending = undefined;
          out.webSocketClosed?.({ tunnel: name, path, ms, opened: true });
        },
        handshakeFailed: (path, ms) => {
          ending = undefined;
          out.webSocketClosed?.({ tunnel: name, path, ms, opened: false });
        },
        tap: inspector ? (request) => inspector.begin(tunnel, { ...request, remote: meta.remote }) : undefined,
      }).catch(failed);
    } else if (meta.kind === "tcp") {
      out.streamOpened?.({ tunnel: name, kind: "tcp" });
      out.connection({ tunnel: name, remote: meta.remote, event: "open" });
      const ms = () => performance.now() - started;
      ending = (reason) => out.connection({ tunnel: name, remote: meta.remote, event: "close", ms: ms(), error: reason });
      serveTcpStream(stream, tunnel.target, (b, error) => {
        if (!ending) return;
        ending = undefined;
        out.connection({ tunnel: name, remote: meta.remote, event: "close", bytesIn: b.in, bytesOut: b.out, ms: ms(), error });
      }).catch(failed);
    } else {
      stream.reset(WireError.PROTOCOL_ERROR);
    }
  } catch (err) {
    failed(err);
  }
}
