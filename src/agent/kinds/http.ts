/**
 * An http tunnel on the agent's side: each "h1" stream a visitor's
 * request (a WebSocket being one that switches protocols), or a private
 * tunnel's connection whose requests come in its bytes, served to the
 * local HTTP service (local-http/), a path route's, or the SDK's handler;
 * and its request from the spec (names or private, pool, warning, response
 * timeout, upgrades, access rules).
 */
import type { HttpAccess, OpenMeta, TunnelRequest } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import { serveHandlerStream } from "../handler-stream.ts";
import { serveConnectorStream, serveHttpStream, type HttpHooks, type RequestLine } from "../http.ts";
import type { ExchangeTap, RequestTaps, TappedRequest } from "../inspector/tap.ts";
import type { AgentOutput, RequestEvent, StreamOpenedEvent, TunnelView } from "../output.ts";
import { allowUpgrades, compactAccess } from "../settings/tunnel-options.ts";
import { upstreamH2Limits } from "../settings/upstream-h2.ts";
import type { AgentKind } from "./unit.ts";

export const HTTP_AGENT: AgentKind = {
  urlTarget: true,

  serve(stream, meta, tunnel, out, inspector) {
    // an h1 stream has its first head in OPEN, unless it is a private tunnel's connection (`user`)
    if (meta.head === undefined && meta.user === undefined) return stream.reset(WireError.PROTOCOL_ERROR);
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
  },

  tunnel(spec, { target, ip, priv, pooled, health, names }) {
    if (spec.hostHeader !== undefined) target.hostHeader = spec.hostHeader;
    if (spec.routes?.length) target.routes = spec.routes;
    // HTTP/2 to every service of the tunnel, its routes' too (the spec checked their schemes)
    if (spec.upstreamProtocol !== undefined && spec.upstreamProtocol !== "http1") {
      const limits = upstreamH2Limits(spec);
      for (const t of [target, ...(target.routes ?? []).map((r) => r.target)]) {
        t.upstreamProtocol = spec.upstreamProtocol;
        if (limits) t.upstreamH2 = limits;
      }
    }
    const request: Extract<TunnelRequest, { protocol: "http" }> = priv
      ? { protocol: "http", private: priv }
      : { protocol: "http", ...names, ...pooled, skipWarning: spec.skipWarning ?? false };
    if (spec.responseTimeout !== undefined) request.responseTimeout = spec.responseTimeout;
    allowUpgrades(request, target, spec.allowUpgrade ?? []);
    const access = compactAccess<HttpAccess>({
      basicAuth: spec.basicAuth,
      ...ip,
      requestHeaderAdd: spec.requestHeaderAdd,
      requestHeaderRemove: spec.requestHeaderRemove,
      responseHeaderAdd: spec.responseHeaderAdd,
      oidc: spec.oidc,
    });
    if (access) request.access = access;
    return { request, target, inspect: spec.inspect ?? true, ...(priv ? {} : health) };
  },
};

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

  /** The stream-opened events of this stream's requests, made once (the outputs read them at once and keep nothing). */
  private openedHttp: StreamOpenedEvent | undefined;

  opened(kind: "http" | "ws", method: string, path: string): void {
    const out = this.out;
    if (out.streamOpened) out.streamOpened(kind === "http" ? (this.openedHttp ??= { tunnel: this.tunnel.name, kind }) : { tunnel: this.tunnel.name, kind });
    this.method = method;
    this.path = path;
    this.owed = "request";
  }

  log(line: RequestLine): void {
    this.owed = line.kind === "ws" ? "websocket" : "nothing";
    // the line is made for this call (http.ts Report): it becomes the event as it is
    const event = line as RequestLine & RequestEvent;
    event.tunnel = this.tunnel.name;
    this.out.request(event);
  }

  switchedClosed(path: string, ms: number): void {
    this.owed = "nothing";
    this.out.webSocketClosed?.({ tunnel: this.tunnel.name, path, ms, opened: true });
  }

  handshakeFailed(path: string, ms: number): void {
    this.owed = "nothing";
    this.out.webSocketClosed?.({ tunnel: this.tunnel.name, path, ms, opened: false });
  }

  /** What the inspector is told of each request: one object a stream, filled for each (the store copies what it keeps). */
  private tapped: TappedRequest | undefined;

  capture(request: Omit<TappedRequest, "remote">): ExchangeTap | undefined {
    const inspector = this.inspector;
    if (!inspector) return undefined;
    const t = (this.tapped ??= { method: "", path: "", headers: [], websocket: false, remote: this.meta.remote, route: undefined, started: undefined, stream: this.stream.id });
    t.method = request.method;
    t.path = request.path;
    t.headers = request.headers;
    t.websocket = request.websocket;
    t.route = request.route;
    t.started = request.started;
    return inspector.begin(this.tunnel, t);
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
