/**
 * The agent's HTTP/2 connections to the local services that speak it
 * (--upstream-protocol h2c, or h2 over TLS): one connection per service,
 * whose streams carry every request to it at once, as HTTP/2 means a
 * client to do (and as a gRPC service expects). It is opened when a
 * request first needs it and again when it is gone (the service closed it,
 * went away with GOAWAY, or it was idle past its limit); requests past what
 * it may carry at once (the service's SETTINGS_MAX_CONCURRENT_STREAMS, the
 * agent's own bound) wait their turn, in order. A connection that never
 * became HTTP/2 (refused, an HTTP/1.1 answer, TLS without h2) fails the
 * requests that waited for it, with why: it is not tried again for them.
 */
import { Http2ClientConnection, type Http2ClientOwner } from "../../http2/client-connection.ts";
import { DEFAULT_H2_CLIENT_LIMITS, type Http2ClientLimits } from "../../http2/client-limits.ts";
import type { Fields, H2ClientStream, H2ResponseHandler } from "../../http2/client-stream.ts";
import type { Http2Io } from "../../http2/output.ts";
import { describeLocalError, type Dialer } from "../local-target.ts";
import { LocalConnection, type ConnectionUser } from "./connection.ts";

/** Where a service that speaks HTTP/2 listens (pool.ts LocalService), and how: h2c, or h2 over TLS; with the tunnel's limits, if it set any; `dial`: how it is reached when not by TCP from here. */
export interface H2Address {
  host: string;
  port: number;
  upstreamProtocol?: "h2c" | "h2";
  dial?: Dialer;
  upstreamH2?: Http2ClientLimits;
}

/** Limits in a connection's key, each set of them written once: tunnels to one service with the same limits share its connection. */
const limitsKeys = new WeakMap<Http2ClientLimits, string>();
function limitsKey(limits: Http2ClientLimits): string {
  let key = limitsKeys.get(limits);
  if (key === undefined) limitsKeys.set(limits, (key = ` ${Object.values(limits).join(",")}`));
  return key;
}

/** A request waiting for a stream: its head, and what hears how it went. */
export interface H2Opening extends H2ResponseHandler {
  readonly fields: Fields;
  /** No body follows the head. */
  readonly endStream: boolean;
  /** Its stream is open, its head sent. */
  opened(stream: H2ClientStream): void;
  /** No stream for it: why, in words (the service cannot be reached, or does not speak HTTP/2). */
  failed(why: string): void;
}

/** The HTTP/2 connections of one agent (of one pool), by service. */
export class H2Services {
  private readonly byKey = new Map<string, H2Service>();

  /** The service's connection and queue, made when first asked for. */
  of(service: H2Address): H2Service {
    // another way to the same host and port is another service (pool.ts keyOf); other limits, another connection
    const key = `${service.upstreamProtocol}://${service.host}:${service.port}${service.dial ? ` via ${service.dial.key}` : ""}${service.upstreamH2 ? limitsKey(service.upstreamH2) : ""}`;
    let found = this.byKey.get(key);
    if (!found) this.byKey.set(key, (found = new H2Service(service, key)));
    return found;
  }

  /** Closes every connection; requests waiting for one fail. */
  close(): void {
    for (const s of this.byKey.values()) s.close();
    this.byKey.clear();
  }
}

export class H2Service {
  /** The connection new streams go on; undefined while there is none (or it is being made). */
  private current: Link | undefined;
  private connecting = false;
  private readonly links = new Set<Link>();
  private readonly waiting: H2Opening[] = [];
  private stopped = false;

  constructor(
    private readonly service: H2Address,
    private readonly key: string,
  ) {}

  /** `request` gets a stream now, or in its turn. */
  open(request: H2Opening): void {
    if (this.stopped) return request.failed("the agent is stopping");
    this.waiting.push(request);
    this.pump();
  }

  /** A request that waits no more (its visitor left). */
  cancel(request: H2Opening): void {
    const at = this.waiting.indexOf(request);
    if (at >= 0) this.waiting.splice(at, 1);
  }

  /** Requests waiting for a stream now (tests look at this). */
  get queued(): number {
    return this.waiting.length;
  }

  /** Connections made so far, and open now (tests look at these). */
  opened = 0;
  get connections(): number {
    return this.links.size;
  }

  close(): void {
    this.stopped = true;
    for (const request of this.waiting.splice(0)) request.failed("the agent is stopping");
    for (const link of [...this.links]) link.client.close();
  }

  /** Opens streams for the waiting requests while the connection takes them; a connection first when there is none to take them. */
  private pump(): void {
    if (this.current && !this.current.client.acceptsStreams && (this.current.client.ready || this.current.client.closing)) this.current = undefined;
    const link = this.current;
    if (!link) {
      if (this.waiting.length > 0) this.connect();
      return;
    }
    for (let n = link.client.available; n > 0 && this.waiting.length > 0; n--) {
      const request = this.waiting.shift()!;
      request.opened(link.client.open(request.fields, request.endStream, request));
    }
  }

  private connect(): void {
    if (this.connecting || this.stopped) return;
    this.connecting = true;
    const { host, port, upstreamProtocol, dial } = this.service;
    const tls = upstreamProtocol === "h2";
    LocalConnection.open(host, port, this.key, tls, tls ? ["h2"] : undefined, dial)
      .then((conn) => {
        this.connecting = false;
        if (conn instanceof Error) return this.failWaiting(describeLocalError(conn));
        if (this.stopped) return conn.close();
        this.opened++;
        const link = new Link(conn, this, tls, this.service.upstreamH2 ?? DEFAULT_H2_CLIENT_LIMITS);
        this.links.add(link);
        this.current = link;
        // streams open once the service's SETTINGS come (slots)
      })
      .catch((err: unknown) => {
        this.connecting = false;
        this.failWaiting(`the agent's HTTP/2 connection failed: ${describeLocalError(err)}`);
      });
  }

  private failWaiting(why: string): void {
    for (const request of this.waiting.splice(0)) request.failed(why);
  }

  /** @internal A link can take streams (or stopped taking them). */
  slots(link: Link): void {
    if (link === this.current || !this.current) this.pump();
  }

  /** @internal A link is over. */
  closed(link: Link, why: string, ready: boolean): void {
    this.links.delete(link);
    if (link === this.current) this.current = undefined;
    // one that never spoke HTTP/2 would not for the next request either: those waiting for it are told why
    if (!ready) return this.failWaiting(why);
    this.pump();
  }
}

/** One connection: the socket (LocalConnection) under the protocol's connection, each telling the other. */
class Link implements ConnectionUser, Http2Io, Http2ClientOwner {
  readonly client: Http2ClientConnection;
  private closeWhenWritten = false;

  constructor(
    private readonly conn: LocalConnection,
    private readonly owner: H2Service,
    /** TLS: ALPN must have agreed on h2, which is known once the handshake is over (the service's first bytes). */
    private alpnDue: boolean,
    limits: Http2ClientLimits,
  ) {
    conn.user = this;
    this.client = new Http2ClientConnection(this, limits, this);
  }

  /** Whether ALPN said h2, once: a service that did not speak it is given up with why. */
  private agreed(): boolean {
    if (!this.alpnDue) return true;
    this.alpnDue = false;
    const protocol = this.conn.alpnProtocol;
    if (protocol === "h2") return true;
    this.conn.destroy();
    this.client.closed(`the service did not agree to HTTP/2 over TLS (ALPN: ${protocol || "none"})`);
    return false;
  }

  // -- the socket's events (ConnectionUser) ---------------------------------------------------------------

  received(bytes: Uint8Array): void {
    if (this.agreed()) this.client.received(bytes);
  }

  drained(): void {
    if (this.closeWhenWritten) return this.conn.close();
    this.client.drained();
  }

  lost(error: Error | undefined): void {
    if (!error) return void (this.agreed() && this.client.closed());
    this.alpnDue = false; // a TLS handshake that failed says more than ALPN would
    this.client.closed(`the service's connection failed: ${describeLocalError(error)}`);
  }

  // -- the protocol's writes (Http2Io) ------------------------------------------------------------------

  write(bytes: Uint8Array): boolean {
    return this.conn.write(bytes);
  }

  close(): void {
    if (this.conn.flushed) this.conn.close();
    else this.closeWhenWritten = true;
  }

  terminate(): void {
    this.conn.destroy();
  }

  // -- the protocol's news (Http2ClientOwner) --------------------------------------------------------------

  slots(): void {
    this.owner.slots(this);
  }

  closed(why: string, ready: boolean): void {
    this.owner.closed(this, why, ready);
  }

  busy(yes: boolean): void {
    // an idle connection is no reason for the agent to keep running
    this.conn.keepsProcessAlive(yes);
  }
}
