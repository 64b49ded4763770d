/**
 * What the agent needs of its runtime, and nothing more: TCP and TLS
 * connections with Bun's socket shape (unbuffered writes that say how much
 * was taken, a drain when there is room again), a WebSocket client with
 * headers and TLS options, a connected UDP socket, and a timer. Bun has all
 * of it natively (bun.ts); Node.js gets it from node:net, node:tls,
 * node:dgram and the `ws` package (node.ts). The CLI runs on Bun only; the
 * npm package `burrow-agent` picks one at load (current.ts).
 */

/** A TCP or TLS connection, as Bun's Socket has it (the subset the agent uses). */
export interface RuntimeSocket<T = unknown> {
  data: T;
  readonly remoteAddress: string;
  /** The peer's port (a listener's connections; undefined where the runtime does not say). */
  readonly remotePort?: number;
  /** TLS: the protocol ALPN agreed on (ConnectOptions.tls.alpn), false or null when none. */
  readonly alpnProtocol?: string | false | null;
  /** Bytes taken now (0 when none fit), or -1 when the socket is closed; what is not taken is the caller's to write on drain. */
  write(bytes: Uint8Array | string): number;
  /** Ends the connection once what was written has gone (FIN). */
  end(): void;
  /** Half-closes: no more writes from this side, reads go on. */
  shutdown(): void;
  /** Drops the connection at once. */
  terminate(): void;
  pause(): void;
  resume(): void;
  setNoDelay(noDelay?: boolean): unknown;
  ref(): void;
  unref(): void;
}

export interface SocketHandlers<T> {
  open?(socket: RuntimeSocket<T>): void;
  data?(socket: RuntimeSocket<T>, bytes: Uint8Array): void;
  /** Room to write again, after a write took less than it was given. */
  drain?(socket: RuntimeSocket<T>): void;
  /** The peer half-closed. */
  end?(socket: RuntimeSocket<T>): void;
  close?(socket: RuntimeSocket<T>, error?: Error): void;
  error?(socket: RuntimeSocket<T>, error: Error): void;
  connectError?(socket: RuntimeSocket<T>, error: Error): void;
  /** TLS: the handshake is over; `ok` false when the certificate did not verify (`error` says why). */
  handshake?(socket: RuntimeSocket<T>, ok: boolean, error: Error | null): void;
}

export interface ConnectOptions<T> {
  hostname: string;
  port: number;
  data?: T;
  allowHalfOpen?: boolean;
  /** `alpn`: the protocols offered in the ClientHello (ALPN), most wanted first. */
  tls?: { rejectUnauthorized: boolean; serverName?: string; alpn?: string[] };
  socket: SocketHandlers<T>;
}

/** The WebSocket client the agent's link uses (the WHATWG shape, with Bun's and ws's terminate()). */
export interface RuntimeWebSocket {
  binaryType: string;
  readonly readyState: number;
  readonly bufferedAmount: number;
  onopen: ((ev: unknown) => void) | null;
  onmessage: ((ev: { data: unknown }) => void) | null;
  onerror: ((ev: unknown) => void) | null;
  onclose: ((ev: { reason: string; code: number }) => void) | null;
  send(data: Uint8Array): void;
  close(code?: number): void;
  terminate(): void;
}

export interface WebSocketOptions {
  headers?: Record<string, string>;
  tls?: { rejectUnauthorized?: boolean; serverName?: string };
  /** An HTTP proxy's URL: Bun's WebSocket goes through it, and on Node.js https-proxy-agent. */
  proxy?: string;
}

/** A UDP socket connected to one address: what it sends goes there, and only that address's datagrams come back. */
export interface ConnectedUdp {
  /** False when the datagram was not sent. Throws an ICMP error that came back since the last send, as Bun does. */
  send(datagram: Uint8Array): boolean;
  close(): void;
}

export interface UdpHandlers {
  data(datagram: Uint8Array): void;
  /** An ICMP error from the other side (nothing listening), possibly without an error object. */
  error(error?: Error): void;
}

/** A TCP port this machine listens on (`burrow connect`'s local side). */
export interface ListenOptions<T> {
  hostname: string;
  /** 0: any free port. */
  port: number;
  /** Each accepted connection's handlers (open, data, drain, end, close, error), as Bun.listen calls them. */
  socket: SocketHandlers<T>;
}

export interface Listening {
  readonly port: number;
  /** Stops listening and drops the connections it accepted. */
  stop(): void;
}

/** A UDP socket bound to a port, talking to any sender (`burrow connect` to a udp tunnel). */
export interface BoundUdp {
  readonly port: number;
  send(datagram: Uint8Array, port: number, address: string): boolean;
  close(): void;
}

/** What a served app may ask of its server: the time a request may stay idle (0: none, for a stream that is quiet on purpose). */
export interface RequestTimeouts {
  timeout(request: Request, seconds: number): void;
}

/** A fetch-style app on a loopback HTTP port (the request inspector's). */
export interface ServeOptions {
  hostname: string;
  /** 0: any free port. */
  port: number;
  fetch(request: Request, server: RequestTimeouts): Response | Promise<Response>;
}

export interface Served {
  readonly port: number;
  /** Stops listening and closes the connections it has. */
  stop(): void;
}

export interface AgentRuntime {
  readonly name: "bun" | "node";
  connect<T>(options: ConnectOptions<T>): Promise<RuntimeSocket<T>>;
  webSocket(url: string, options: WebSocketOptions): RuntimeWebSocket;
  /** A UDP socket connected to `host`:`port`, bound on any port of the family `ipv6` says. */
  connectUdp(host: string, port: number, ipv6: boolean, handlers: UdpHandlers): Promise<ConnectedUdp>;
  sleep(ms: number): Promise<void>;
  serve(options: ServeOptions): Promise<Served>;
  /** Listens on `hostname`:`port`; rejects when the port is taken. */
  listen<T>(options: ListenOptions<T>): Promise<Listening>;
  /** A UDP socket bound on `hostname`:`port` (0: any); `data` gets each datagram with its sender. */
  bindUdp(hostname: string, port: number, data: (datagram: Uint8Array, port: number, address: string) => void): Promise<BoundUdp>;
}
