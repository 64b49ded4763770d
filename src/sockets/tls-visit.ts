/**
 * One visitor's connection to the TLS front (tls-front.ts), from its first
 * byte to its close: the ClientHello is read, bounded in bytes
 * (MAX_HELLO_BYTES) and in time; then the connection is either piped,
 * hello first, into the internal TLS listener for its server name, or
 * handed undecrypted to a passthrough that `route` chose, or refused with
 * TLS's unrecognized_name alert when nothing here answers to its name.
 */
import type { Socket, SocketHandler } from "bun";
import { HelloError, MAX_HELLO_BYTES, parseClientHello, type ClientHello } from "../tls/client-hello.ts";
import { SocketPipe } from "./socket-pipe.ts";
import type { Peer, SocketSet, TlsTerminators } from "./tls-terminators.ts";

/**
 * Takes a TLS connection as it came, before any decryption (a tunnel that
 * carries TLS to the agent, say). From open() on, the connection's events
 * go here; its `data` is the front's and not to be touched. The socket
 * allows half-open: a FIN from the visitor comes as end(), and the socket
 * stays writable until the passthrough ends it.
 */
export interface Passthrough {
  /** `firstBytes`: every byte read so far, the ClientHello and whatever followed it. */
  open(socket: Socket<unknown>, firstBytes: Uint8Array): void;
  data?(socket: Socket<unknown>, chunk: Uint8Array): void;
  drain?(socket: Socket<unknown>): void;
  end?(socket: Socket<unknown>): void;
  close?(socket: Socket<unknown>, error?: Error): void;
}

/**
 * What becomes of a connection, by its hello: decrypted here ("terminate",
 * with the certificate for its name), refused with TLS's unrecognized_name
 * alert ("unrecognized": no name, or one nothing answers to here), or
 * handed on undecrypted.
 */
export type Route = "terminate" | "unrecognized" | Passthrough;

export interface VisitContext {
  /** Where "terminate" pipes; none on a front that only passes through (then it is "unrecognized"). */
  terminators?: TlsTerminators<any>;
  sockets: SocketSet;
  helloTimeoutMs: number;
  /** May answer later (a name looked up elsewhere): the connection waits, paused, meanwhile. */
  route?: (hello: ClientHello) => Route | Promise<Route>;
  /** A connection refused before its handshake, and why. */
  fault(why: string, socket: Socket<Visit>): void;
}

/**
 * The front's connections to its TLS listeners. Their `data` is the Visit,
 * so one handler serves them all.
 */
const UPSTREAM: SocketHandler<Visit> = {
  open: (socket) => socket.data.upstreamOpen(socket),
  data: (socket, chunk) => socket.data.pipe?.data("b", chunk),
  drain: (socket) => socket.data.pipe?.drain("b"),
  end: (socket) => socket.data.pipe?.end("b"),
  close: (socket, error) => socket.data.upstreamClosed(socket, error),
  connectError: (socket, error) => socket.data.upstreamClosed(socket, error),
};

/**
 * A TLS alert record (RFC 8446 6): content type alert (21), the record
 * version every TLS version writes here (3,3), length 2, level fatal (2),
 * description unrecognized_name (112). A client shows it as such
 * ("tlsv1 unrecognized name"), rather than a bare reset.
 */
const UNRECOGNIZED_NAME_ALERT = Uint8Array.from([21, 3, 3, 0, 2, 2, 112]);

export class Visit {
  /** "routing": the hello is read and its route is being looked up. */
  private state: "hello" | "routing" | "connecting" | "piped" | "routed" | "closed" = "hello";
  /** What the visitor sent before it was piped or routed (the hello, and anything after it). */
  private buffer: Uint8Array = new Uint8Array(0);
  private length = 0;
  /** The visitor half-closed before the pipe was there. */
  private ended = false;
  private readonly timer: ReturnType<typeof setTimeout>;
  private readonly peer: Peer;
  pipe: SocketPipe | undefined;
  private upstream: Socket<Visit> | undefined;
  /** The TLS listener's port and the upstream's own, while the terminators expect it. */
  private expected: [listenerPort: number, localPort: number] | undefined;
  private passthrough: Passthrough | undefined;

  constructor(
    private readonly socket: Socket<Visit>,
    private readonly context: VisitContext,
  ) {
    // read now: once the socket is closed Bun no longer knows
    this.peer = { address: socket.remoteAddress, port: socket.remotePort, localAddress: socket.localAddress, localPort: socket.localPort };
    this.timer = setTimeout(() => this.refuse(`no whole ClientHello within ${context.helloTimeoutMs} ms`), context.helloTimeoutMs);
    this.timer.unref();
  }

  /** Call once the socket's data is this Visit: a refusal may close it at once. */
  start(): void {
    // a peer that reset before open ran has no address any more: nothing to serve
    if (typeof this.peer.address !== "string") this.refuse("gone before it opened");
  }

  fromVisitor(chunk: Uint8Array): void {
    switch (this.state) {
      case "piped":
        return this.pipe!.data("a", chunk);
      case "routed":
        return this.passthrough!.data?.(this.socket as Socket<unknown>, chunk);
      case "routing":
      case "connecting":
        // paused, but a read may have been under way
        return this.keep(chunk) ? undefined : this.refuse("sent too much before its handshake");
      case "hello":
        return this.readHello(chunk);
    }
  }

  visitorDrain(): void {
    if (this.state === "piped") this.pipe!.drain("a");
    else if (this.state === "routed") this.passthrough!.drain?.(this.socket as Socket<unknown>);
  }

  visitorEnd(): void {
    if (this.state === "piped") this.pipe!.end("a");
    else if (this.state === "routed") this.passthrough!.end?.(this.socket as Socket<unknown>);
    else if (this.state === "hello") this.refuse("closed before its ClientHello was whole");
    else this.ended = true;
  }

  visitorClosed(error?: Error): void {
    clearTimeout(this.timer);
    const was = this.state;
    this.state = "closed";
    this.buffer = new Uint8Array(0);
    if (was === "piped") this.pipe!.closed("a", error);
    else if (was === "routed") this.passthrough!.close?.(this.socket as Socket<unknown>, error);
    else if (was === "connecting") this.upstream?.terminate(); // not open yet: upstreamOpen cuts it
  }

  /** The front's connection to the TLS listener is up: it carries the hello, then both ways. */
  upstreamOpen(upstream: Socket<Visit>): void {
    this.context.sockets.add(upstream);
    this.upstream = upstream;
    if (this.state !== "connecting") return upstream.terminate();
    // before the hello goes: the TLS socket opens after its handshake, and asks then who it carries
    this.expected = [upstream.remotePort, upstream.localPort];
    this.context.terminators!.expect(...this.expected, this.peer);
    upstream.setNoDelay(true);
    this.state = "piped";
    this.pipe = new SocketPipe(this.socket, upstream);
    const first = this.buffer.subarray(0, this.length);
    this.buffer = new Uint8Array(0);
    this.pipe.start(first, this.ended);
  }

  upstreamClosed(upstream: Socket<Visit>, error?: Error): void {
    this.context.sockets.delete(upstream);
    if (this.expected) this.context.terminators!.forget(...this.expected);
    this.expected = undefined;
    if (this.pipe) this.pipe.closed("b", error);
    else if (this.state === "connecting") this.socket.terminate();
  }

  private readHello(chunk: Uint8Array): void {
    if (!this.keep(chunk)) return this.refuse(`TOO_LONG: more than ${MAX_HELLO_BYTES} bytes and no ClientHello`);
    const bytes = this.buffer.subarray(0, this.length);
    // with its pieces: its JA4, for the rules that read it, is made from them when one does
    const hello = parseClientHello(bytes, true);
    if (hello === "incomplete") return;
    if (hello instanceof HelloError) return this.refuse(`${hello.code}: ${hello.message}`);
    const route = this.context.route?.(hello) ?? "terminate";
    if (!(route instanceof Promise)) return this.follow(hello, route);
    // what comes meanwhile waits in the kernel; a lookup that fails is a name nothing answers to,
    // and one that takes longer than the hello's time is the hello's timeout
    this.state = "routing";
    this.socket.pause();
    route.then(
      (r) => this.follow(hello, r),
      () => this.follow(hello, "unrecognized"),
    );
  }

  /** Where the hello's route sends the connection. */
  private follow(hello: ClientHello, route: Route): void {
    if (this.state === "closed") return; // the visitor left (or timed out) while its route was looked up
    clearTimeout(this.timer);
    if (this.state === "routing") this.socket.resume();
    const bytes = this.buffer.subarray(0, this.length);
    if (route === "unrecognized" || (route === "terminate" && !this.context.terminators)) return this.unrecognized(hello.serverName);
    if (route !== "terminate") {
      this.state = "routed";
      this.passthrough = route;
      this.buffer = new Uint8Array(0);
      route.open(this.socket as Socket<unknown>, bytes);
      if (this.ended) route.end?.(this.socket as Socket<unknown>);
      return;
    }
    const port = this.context.terminators!.portFor(hello.serverName);
    if (port === undefined) return this.refuse("no TLS listener for its certificate");
    this.peer.hello = hello;
    this.state = "connecting";
    // what comes meanwhile waits in the kernel, not here
    this.socket.pause();
    this.socket.setNoDelay(true);
    Bun.connect<Visit>({ hostname: "127.0.0.1", port, allowHalfOpen: true, data: this, socket: UPSTREAM }).catch(() => {
      // connectError has closed the visitor
    });
  }

  /** Appends to the buffer, doubling it as it grows; false when it would grow past twice the hello's bound. */
  private keep(chunk: Uint8Array): boolean {
    if (this.length === 0) {
      // Bun hands each read a buffer of its own: the first is kept as it is
      this.buffer = chunk;
      this.length = chunk.length;
      return true;
    }
    if (this.length + chunk.length > 2 * MAX_HELLO_BYTES) return false;
    if (this.length + chunk.length > this.buffer.length) {
      const grown = new Uint8Array(Math.max(2 * this.buffer.length, this.length + chunk.length));
      grown.set(this.buffer.subarray(0, this.length));
      this.buffer = grown;
    }
    this.buffer.set(chunk, this.length);
    this.length += chunk.length;
    return true;
  }

  /** A name nothing here answers to (or none): TLS's fatal unrecognized_name alert, then the connection ends. */
  private unrecognized(name: string | undefined): void {
    this.state = "closed";
    this.context.fault(name === undefined ? "no server name" : `no tls tunnel named ${name.slice(0, 253)}`, this.socket);
    this.socket.end(UNRECOGNIZED_NAME_ALERT);
  }

  /** Closes a connection that will not become a TLS session here. */
  private refuse(why: string): void {
    if (this.state !== "hello" && this.state !== "routing" && this.state !== "connecting") return;
    clearTimeout(this.timer);
    this.context.fault(why, this.socket);
    this.socket.terminate();
  }
}
