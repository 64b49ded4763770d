/**
 * One stream the edge opened, served by the kind it is: an HTTP request
 * ("h1", a WebSocket being one that switches protocols), or a TCP or TLS
 * connection (its bytes, a TLS one undecrypted), each to its tunnel's local
 * service. One visitor's failure (a
 * head the agent cannot read, a local socket error) ends that stream, never
 * the agent.
 */
import type { OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { serveConnectorStream, serveHttpStream, type HttpHooks, type RequestLine } from "./http.ts";
import type { ExchangeTap, RequestTaps, TappedRequest } from "./inspector/tap.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { parseEndpoint, proxyV2Header } from "../sockets/proxy-protocol.ts";
import { serveTcpStream } from "./tcp.ts";
import { serveHandlerStream } from "./handler-stream.ts";
import { serveUdpFlow } from "./udp.ts";

/** `inspector`: where HTTP requests and WebSockets of tunnels with `inspect` on are captured, when it runs. */
export function serveStream(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput, inspector?: RequestTaps): void {
  if (meta.kind === "h1" && (meta.head !== undefined || meta.user !== undefined)) {
    const served = new HttpServed(stream, meta, tunnel, out, inspector);
    if (tunnel.target.handler && meta.head !== undefined) return serveHandlerStream(stream, meta.head, tunnel.target.handler, served);
    try {
      // a private tunnel's connection (`user`, no head) brings its heads in its bytes
      (meta.head === undefined ? serveConnectorStream(stream, meta.user!, tunnel.target, served) : serveHttpStream(stream, meta.head, tunnel.target, served, meta.keep === true)).catch((err) =>
        served.failed(err),
      );
    } catch (err) {
      served.failed(err);
    }
    return;
  }
  if (meta.kind === "udp") return serveFlow(stream, meta, tunnel, out);
  // a tls stream is a tcp one to the agent: the visitor's TLS, hello first, goes to the service as it came
  if (meta.kind !== "tcp" && meta.kind !== "tls") return stream.reset(WireError.PROTOCOL_ERROR);
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

/** A udp flow: its datagrams both ways, the output told when it opens and when it ends. */
function serveFlow(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput): void {
  const started = performance.now();
  out.streamOpened?.({ tunnel: tunnel.name, kind: "udp" });
  const counts = serveUdpFlow(stream, tunnel.target, (ended, error) => {
    out.flow?.({ tunnel: tunnel.name, remote: meta.remote, event: "close", ...ended, ms: performance.now() - started, ...(error ? { error } : {}) });
  });
  out.flow?.({ tunnel: tunnel.name, remote: meta.remote, event: "open", live: counts });
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

/**
 * One h1 stream as the output sees it: opened, then its request line (or a
 * WebSocket's switch and close), and, if it fails before it says anything
 * more, a 502 line with why. It is the stream's HttpHooks: one object a
 * request, its methods on the prototype, rather than a closure each.
 */
class HttpServed implements HttpHooks {
  private readonly started = performance.now();
  /** What the output still owes for this stream if it fails now: its request line, a WebSocket's close, or nothing. */
  private owed: "nothing" | "request" | "websocket" = "nothing";
  private method = "?";
  private path = "?";
  readonly tap: HttpHooks["tap"];

  constructor(
    private readonly stream: Stream,
    private readonly meta: OpenMeta,
    private readonly tunnel: TunnelView,
    private readonly out: AgentOutput,
    private readonly inspector: RequestTaps | undefined,
  ) {
    this.tap = inspector ? HttpServed.prototype.capture : undefined;
  }

  opened(kind: "http" | "ws", method: string, path: string): void {
    this.out.streamOpened?.({ tunnel: this.tunnel.name, kind });
    this.method = method;
    this.path = path;
    this.owed = "request";
  }

  log(line: RequestLine): void {
    this.owed = line.kind === "ws" ? "websocket" : "nothing";
    this.out.request({ tunnel: this.tunnel.name, method: line.method, path: line.path, status: line.status, ms: line.ms, kind: line.kind, route: line.route });
  }

  switchedClosed(path: string, ms: number): void {
    this.owed = "nothing";
    this.out.webSocketClosed?.({ tunnel: this.tunnel.name, path, ms, opened: true });
  }

  handshakeFailed(path: string, ms: number): void {
    this.owed = "nothing";
    this.out.webSocketClosed?.({ tunnel: this.tunnel.name, path, ms, opened: false });
  }

  capture(request: Omit<TappedRequest, "remote">): ExchangeTap | undefined {
    return this.inspector?.begin(this.tunnel, { method: request.method, path: request.path, headers: request.headers, websocket: request.websocket, remote: this.meta.remote, route: request.route });
  }

  /** An exception: the stream ends, and the output hears of it once. */
  failed(err: unknown): void {
    const reason = String((err as Error)?.message ?? err).slice(0, 100);
    this.stream.reset(`${WireError.UPSTREAM_FAILED} ${reason}`);
    const owed = this.owed;
    this.owed = "nothing";
    const ms = performance.now() - this.started;
    if (owed === "request") this.out.request({ tunnel: this.tunnel.name, method: this.method, path: this.path, status: `502 (${reason})`, ms });
    else if (owed === "websocket") this.out.webSocketClosed?.({ tunnel: this.tunnel.name, path: this.path, ms, opened: true });
  }
}
