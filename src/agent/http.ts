/**
 * The agent's side of an h1 stream: one visitor request, its head in OPEN,
 * its body and the response as bytes (a kept stream: one request after
 * another). The stream's requests (local-http/forward.ts) carry each
 * request over the agent's own HTTP/1.1 connections to the local service,
 * plain or TLS (local-http/exchange.ts), and ask this file what each head
 * becomes: read once, given the tunnel's Host, routes and switch rule
 * (local-http/request.ts); this file tells the request log and the
 * inspector what happened.
 */
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { settles } from "../runtime/settles.ts";
import { HeadText, type ExchangeTap, type TappedRequest } from "./inspector/tap.ts";
import type { ParsedHead } from "../http/response-head.ts";
import type { ExchangeReport } from "./local-http/exchange.ts";
import { StreamRequests, type ServedRequest, type StreamServer } from "./local-http/forward.ts";
import { ConnectionPool } from "./local-http/pool.ts";
import { localRequest, readHead, readHeadBytes, withAllowedSwitch, type ReadHead } from "./local-http/request.ts";
import { localAuthority, type LocalTarget } from "./local-target.ts";
import { routeFor } from "./routes.ts";

export type { LocalTarget };

export interface RequestLine {
  method: string;
  path: string;
  /** The path route that served it (--route), when one did. */
  route?: string;
  /** The final status, "101 websocket" for a switch, "502 (why)" for a failure, or "cancelled". */
  status: number | string;
  ms: number;
  /** "ws" for a 101: the connection stays open until `switchedClosed`. */
  kind?: "http" | "ws";
}

export interface HttpHooks {
  /** The head was read (or could not be): a WebSocket's upgrade request or another (for the count of what is in flight). */
  opened?(kind: "http" | "ws", method: string, path: string): void;
  /** Once per request: its final status (a 101's at the switch), or why there is none. */
  log(line: RequestLine): void;
  /** After a 101: the switched connection is over, both ways, `ms` after the request came. */
  switchedClosed?(path: string, ms: number): void;
  /** A WebSocket upgrade that failed before the service answered: no request line, this instead. */
  handshakeFailed?(path: string, ms: number): void;
  /** The inspector's copy of this request, when it is captured. */
  tap?(request: Omit<TappedRequest, "remote">): ExchangeTap | undefined;
  /** Where connections come from; the agent's shared pool unless a test brings its own. */
  pool?: ConnectionPool;
}

/** Connections to local services, shared by all streams of the agent. */
let sharedPool: ConnectionPool | undefined;

/**
 * Serves one h1 stream whose OPEN carried `headText`; resolves when its
 * exchange is over, or with `keep` (OpenMeta), when the last of the
 * visitor connection's requests it carried is.
 */
export function serveHttpStream(stream: Stream, headText: string, target: LocalTarget, hooks: HttpHooks, keep = false): Promise<void> {
  const { promise, resolve, reject } = settles<void>();
  const server = new RequestServer(stream, target, hooks, resolve, reject);
  new StreamRequests(stream, target, hooks.pool ?? (sharedPool ??= new ConnectionPool()), keep, server).begin(headText);
  return promise;
}

/**
 * Serves a private http tunnel's connection (`burrow connect`): the
 * connector's requests, heads and all, in the stream's bytes, each given
 * X-Burrow-User: `user` (the edge's word for who the connector is).
 */
export function serveConnectorStream(stream: Stream, user: string, target: LocalTarget, hooks: HttpHooks): Promise<void> {
  const { promise, resolve, reject } = settles<void>();
  const server = new RequestServer(stream, target, hooks, resolve, reject, user);
  new StreamRequests(stream, target, hooks.pool ?? (sharedPool ??= new ConnectionPool()), true, server).beginFromBytes();
  return promise;
}

/** What each head of a stream becomes, and what the log and the inspector are told: one object a stream. */
class RequestServer implements StreamServer {
  private readonly host: string | undefined;
  /** The request log's view of the request under way: one a stream, as its requests come one at a time. */
  private readonly report: Report;
  /** The request under way as handed to the stream's requests: one a stream, filled for each (they copy what they keep). */
  private readonly served: ServedRequest;
  /** What the inspector is told of the request under way (HttpHooks.tap), likewise. */
  private tapped: Omit<TappedRequest, "remote"> | undefined;

  constructor(
    private readonly stream: Stream,
    private readonly target: LocalTarget,
    private readonly hooks: HttpHooks,
    readonly over: () => void,
    readonly threw: (err: unknown) => void,
    /** A private tunnel's connector, vouched for by the edge: X-Burrow-User on each request. */
    private readonly user?: string,
  ) {
    this.host = hostFor(target, target);
    this.report = new Report(hooks);
    this.served = { request: undefined!, report: this.report, tap: undefined, service: undefined };
  }

  /** One request of the stream; undefined when it cannot be served (the stream is reset, or the connector answered, with why). */
  request(headText: string | undefined, received?: Uint8Array): ServedRequest | undefined {
    const { hooks } = this;
    const started = performance.now();
    // the head is read once, for what the agent must know (it goes on as the edge sent it); an inspector
    // reads its fields when someone looks. OPEN's head comes as text, one in the stream's bytes as bytes (both with the blank line)
    let read: ReadHead | string;
    if (received !== undefined) read = readHeadBytes(received, this.user);
    else if (!headText!.endsWith("\r\n\r\n")) read = "the request head does not end with a blank line";
    else read = readHead(headText!.slice(0, -4), this.user);
    if (typeof read === "string") {
      this.unreadable(read, started);
      return undefined;
    }
    const allowed = withAllowedSwitch(read, this.target.allowUpgrade);
    const switchTakenOff = allowed !== read;
    const { head } = allowed;
    // a path route picks the service (and so the Host a rewrite gives) by the path made normal, which is the one sent
    const route = this.target.routes ? routeFor(this.target.routes, head.target) : undefined;
    const host = route ? hostFor(this.target, route.target) : this.host;
    const request = localRequest(allowed, host, this.user === undefined && !switchTakenOff ? received : undefined);
    const { method, target: path, upgrade } = head;
    const websocket = upgrade === "websocket";
    hooks.opened?.(websocket ? "ws" : "http", method, path);
    const served = this.served;
    served.request = request;
    // the inspector shows the head as the agent read it (a connector's with burrow's fields dropped and
    // X-Burrow-User vouched), or as the service gets it where a switch was taken off: its bytes as they
    // came (copied by the capture) when the head was read from them, its text otherwise
    if (hooks.tap) {
      // one object a stream, filled for each request: the tap copies what it keeps
      const t = (this.tapped ??= { method, path, headers: [], websocket, route: undefined, started });
      t.method = method;
      t.path = path;
      t.headers = switchTakenOff ? new HeadText(headOf(request), "request") : shownHead(allowed);
      t.websocket = websocket;
      t.route = route?.prefix;
      t.started = started;
      served.tap = hooks.tap(t);
    } else served.tap = undefined;
    served.service = route?.target;
    this.report.begin(method, path, upgrade, started, route?.prefix);
    return served;
  }

  /**
   * A head that cannot be read. The edge sends heads it has read and
   * checked, so one of its that cannot be is its fault: the stream is reset.
   * A private tunnel's connector sends its own, unread by the edge: it is
   * told 400, as a server tells a client, and the connection ends.
   */
  unreadable(why: string, started = performance.now()): void {
    this.hooks.opened?.("http", "?", "?");
    if (this.user === undefined) {
      this.stream.reset(`${WireError.UPSTREAM_FAILED} the request head cannot be read (${why})`);
      this.hooks.log({ method: "?", path: "?", status: `502 (${why})`, ms: performance.now() - started });
      return;
    }
    answerConnector(this.stream, "400 Bad Request", `burrow: the request cannot be read: ${why}\n`, false);
    this.hooks.log({ method: "?", path: "?", status: 400, ms: performance.now() - started });
  }

  /**
   * The local service gave no answer (it could not be reached, broke off
   * its response head, or switched protocols without answering what was
   * asked). A public visitor is given the edge's 502 page from the stream's
   * reset; a private tunnel's connector has no edge reading for it, so it
   * is told 502 here, and its connection ends.
   */
  noAnswer(why: string, replied: boolean): boolean {
    if (this.user === undefined) return false;
    answerConnector(this.stream, "502 Bad Gateway", `burrow: the tunnel's service gave no answer: ${why}\n`, replied);
    return true;
  }
}

/** A head as the inspector reads it when someone looks: its bytes (blank line included), or its text. */
function shownHead(read: ReadHead): HeadText | Uint8Array {
  return read.text === undefined ? read.bytes! : new HeadText(read.text, "request");
}

/** A request's head as it goes to the service, without its blank line. */
function headOf(request: { bytes: Uint8Array }): string {
  const { bytes } = request;
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength - 4).toString("latin1");
}

/** An answer of the agent's own to a private tunnel's connector, after which its connection ends (what it sends more is dropped). */
function answerConnector(stream: Stream, status: string, body: string, replied: boolean): void {
  const bytes = Buffer.from(`HTTP/1.1 ${status}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`);
  stream.onData = (chunk) => stream.consumed(chunk.byteLength);
  if (!replied) stream.reply({});
  stream.end(bytes);
}

/** The Host a request to `service` gets: the tunnel's rule (--host-header), a rewrite naming the service it goes to. */
function hostFor(tunnel: LocalTarget, service: LocalTarget): string | undefined {
  return tunnel.hostHeader === "rewrite" ? localAuthority(service) : tunnel.hostHeader;
}

/**
 * What happened to a request, told to the request log: one object a
 * stream, begun again for each of its requests (the one before is over by
 * then), rather than a closure per outcome.
 */
class Report implements ExchangeReport {
  private method = "?";
  private path = "?";
  private upgrade: string | undefined;
  private started = 0;
  private route: string | undefined;

  constructor(private readonly hooks: HttpHooks) {}

  begin(method: string, path: string, upgrade: string | undefined, started: number, route: string | undefined): this {
    this.method = method;
    this.path = path;
    this.upgrade = upgrade;
    this.started = started;
    this.route = route;
    return this;
  }

  private line(status: RequestLine["status"], kind?: RequestLine["kind"]): RequestLine {
    const line: RequestLine = { method: this.method, path: this.path, status, ms: this.ms() };
    if (kind) line.kind = kind;
    if (this.route !== undefined) line.route = this.route;
    return line;
  }

  private ms(): number {
    return performance.now() - this.started;
  }

  responded(head: ParsedHead): void {
    const { upgrade } = this;
    if (head.status !== 101) return this.hooks.log(this.line(head.status));
    this.hooks.log(this.line(upgrade === "websocket" ? "101 websocket" : `101 ${upgrade}`, "ws"));
  }

  failed(why: string): void {
    // a WebSocket the service never switched to ends as one whose handshake failed (output.ts)
    if (this.upgrade === "websocket" && this.hooks.handshakeFailed) return this.hooks.handshakeFailed(this.path, this.ms());
    this.hooks.log(this.line(`502 (${why})`));
  }

  cancelled(): void {
    this.hooks.log(this.line("cancelled"));
  }

  switchedClosed(): void {
    this.hooks.switchedClosed?.(this.path, this.ms());
  }
}
