/**
 * The agent's runtime on Node.js (the npm package `burrow-agent`): node:net
 * and node:tls sockets shaped as Bun's, node:dgram for UDP, and the `ws`
 * package for the WebSocket (Node's own has no headers or TLS options).
 *
 * A Bun socket's write is unbuffered: it takes what the kernel takes and
 * says how much. A Node socket buffers everything it is given. So that a
 * slow peer still pushes back on the stream feeding it, write() here takes
 * a whole chunk while the socket is under its high-water mark and nothing
 * (0) once it is over it, until 'drain', when the drain handler is called,
 * as Bun calls it. Node keeps a reference to what it buffers, and callers
 * reuse their buffers (the mux's scratch), so each chunk is copied.
 */
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { connect as netConnect, createServer as createNetServer, type Server as NetServer, type Socket as NetSocket } from "node:net";
import { connect as tlsConnect, type ConnectionOptions, type TLSSocket } from "node:tls";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Readable } from "node:stream";
import WebSocket from "ws";
import { HttpsProxyAgent } from "https-proxy-agent";
import type {
  AgentRuntime,
  BoundUdp,
  ConnectOptions,
  ConnectedUdp,
  Listening,
  ListenOptions,
  RuntimeSocket,
  RuntimeWebSocket,
  Served,
  ServeOptions,
  SocketHandlers,
  UdpHandlers,
  WebSocketOptions,
} from "./types.ts";

class NodeSocket<T> implements RuntimeSocket<T> {
  /** Over the high-water mark: writes take nothing until 'drain'. */
  private full = false;

  constructor(
    readonly raw: NetSocket | TLSSocket,
    public data: T,
  ) {}

  get remoteAddress(): string {
    return this.raw.remoteAddress ?? "";
  }

  get remotePort(): number | undefined {
    return this.raw.remotePort;
  }

  get alpnProtocol(): string | false | null {
    return (this.raw as TLSSocket).alpnProtocol ?? null;
  }

  write(bytes: Uint8Array | string): number {
    const raw = this.raw;
    if (raw.destroyed || !raw.writable) return -1;
    if (this.full) return 0;
    const chunk = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : Buffer.from(bytes);
    if (!raw.write(chunk)) this.full = true;
    return typeof bytes === "string" ? chunk.byteLength : bytes.byteLength;
  }

  drained(): boolean {
    const was = this.full;
    this.full = false;
    return was;
  }

  end(): void {
    this.raw.end();
  }

  shutdown(): void {
    this.raw.end();
  }

  terminate(): void {
    this.raw.destroy();
  }

  pause(): void {
    this.raw.pause();
  }

  resume(): void {
    this.raw.resume();
  }

  setNoDelay(noDelay = true): boolean {
    this.raw.setNoDelay(noDelay);
    return true;
  }

  ref(): void {
    this.raw.ref();
  }

  unref(): void {
    this.raw.unref();
  }
}

/** A Node socket's bytes, drains and FIN given to Bun-shaped handlers (a drain only after a write that took nothing). */
function passBytes<T>(raw: NetSocket | TLSSocket, socket: NodeSocket<T>, h: SocketHandlers<T>): void {
  raw.on("data", (chunk: Buffer) => h.data?.(socket, chunk));
  raw.on("drain", () => {
    if (socket.drained()) h.drain?.(socket);
  });
  raw.on("end", () => h.end?.(socket));
}

function connect<T>(options: ConnectOptions<T>): Promise<RuntimeSocket<T>> {
  return new Promise((resolve, reject) => {
    const h: SocketHandlers<T> = options.socket;
    const allowHalfOpen = options.allowHalfOpen ?? false;
    const tls = options.tls;
    const raw = tls
      ? tlsConnect({
          host: options.hostname,
          port: options.port,
          rejectUnauthorized: false, // judged below, as Bun's handshake handler judges it
          ...(tls.serverName ? { servername: tls.serverName } : {}),
          ...(tls.alpn ? { ALPNProtocols: tls.alpn } : {}),
          allowHalfOpen,
        } as ConnectionOptions)
      : netConnect({ host: options.hostname, port: options.port, allowHalfOpen });
    const socket = new NodeSocket<T>(raw, options.data as T);
    let connected = false;
    let lastError: Error | undefined;
    const opened = () => {
      connected = true;
      h.open?.(socket);
      if (tls) {
        const verified = (raw as TLSSocket).authorized;
        const why = verified ? null : new Error(String((raw as TLSSocket).authorizationError ?? "the certificate did not verify"));
        if (!verified && tls.rejectUnauthorized && !h.handshake) {
          raw.destroy(why!);
          return;
        }
        h.handshake?.(socket, true, verified ? null : why);
      }
      resolve(socket);
    };
    raw.once(tls ? "secureConnect" : "connect", opened);
    passBytes(raw, socket, h);
    raw.on("error", (err) => {
      lastError = err;
      if (!connected) {
        h.connectError?.(socket, err);
        reject(err);
        return;
      }
      h.error?.(socket, err);
    });
    raw.on("close", () => {
      if (connected) h.close?.(socket, lastError);
    });
  });
}

/**
 * ws's client with the options the agent gives Bun's: headers, TLS (the name
 * it verifies, whether it verifies at all), and an HTTP proxy, reached with
 * CONNECT (https-proxy-agent), as Bun's WebSocket does with its `proxy`.
 */
function webSocket(url: string, options: WebSocketOptions): RuntimeWebSocket {
  const ws = new WebSocket(url, {
    headers: options.headers,
    rejectUnauthorized: options.tls?.rejectUnauthorized ?? true,
    ...(options.tls?.serverName ? { servername: options.tls.serverName } : {}),
    ...(options.proxy ? { agent: new HttpsProxyAgent(options.proxy) } : {}),
    perMessageDeflate: false,
  });
  return ws as unknown as RuntimeWebSocket;
}

async function connectUdp(host: string, port: number, ipv6: boolean, handlers: UdpHandlers): Promise<ConnectedUdp> {
  const socket: UdpSocket = createSocket(ipv6 ? "udp6" : "udp4");
  socket.on("message", (datagram) => handlers.data(datagram));
  socket.on("error", (err) => handlers.error(err));
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.connect(port, host, () => {
      socket.off("error", reject);
      resolve();
    });
  });
  let closed = false;
  return {
    send(datagram) {
      if (closed) return false;
      socket.send(datagram);
      return true;
    },
    close() {
      if (closed) return;
      closed = true;
      socket.close();
    },
  };
}

/** Listens on `hostname`:`port` (0: any); the port it got, or the error (a port taken). */
async function listening(server: NetServer, port: number, hostname: string): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, hostname, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const address = server.address();
  return typeof address === "object" && address ? address.port : port;
}

/**
 * A TCP listener whose connections are shaped as Bun's (NodeSocket), their
 * events given to the handlers as Bun.listen gives them. Half-open: a peer's
 * FIN is `end`, and this side ends when its user says (as with Bun).
 */
async function listen<T>(options: ListenOptions<T>): Promise<Listening> {
  const h = options.socket;
  const accepted = new Set<NetSocket>();
  const server = createNetServer({ allowHalfOpen: true }, (raw) => {
    accepted.add(raw);
    const socket = new NodeSocket<T>(raw, undefined as T);
    let lastError: Error | undefined;
    passBytes(raw, socket, h);
    raw.on("error", (err) => {
      lastError = err;
      h.error?.(socket, err);
    });
    raw.on("close", () => {
      accepted.delete(raw);
      h.close?.(socket, lastError);
    });
    h.open?.(socket);
  });
  const port = await listening(server, options.port, options.hostname);
  return {
    port,
    stop() {
      server.close();
      for (const raw of accepted) raw.destroy();
    },
  };
}

/** A UDP socket bound on `hostname`:`port`, for any sender. */
async function bindUdp(hostname: string, port: number, data: (datagram: Uint8Array, port: number, address: string) => void): Promise<BoundUdp> {
  const socket: UdpSocket = createSocket(hostname.includes(":") ? "udp6" : "udp4");
  socket.on("message", (datagram, from) => data(datagram, from.port, from.address));
  await new Promise<void>((resolve, reject) => {
    socket.once("error", reject);
    socket.bind(port, hostname, () => {
      socket.off("error", reject);
      resolve();
    });
  });
  socket.on("error", () => {}); // an ICMP error for one sender is not the socket's end
  let closed = false;
  return {
    port: socket.address().port,
    send(datagram, toPort, toAddress) {
      if (closed) return false;
      socket.send(datagram, toPort, toAddress);
      return true;
    },
    close() {
      if (closed) return;
      closed = true;
      socket.close();
    },
  };
}

/** The fetch-style app on node:http: each request made a Request, each Response streamed back (an event stream stays open). */
async function serve(options: ServeOptions): Promise<Served> {
  const timeouts = { timeout() {} }; // node:http puts no idle limit on a response being written
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i]!, req.rawHeaders[i + 1]!);
    const method = req.method ?? "GET";
    const body = method === "GET" || method === "HEAD" ? undefined : (Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>);
    const url = `http://${req.headers.host ?? `${options.hostname}:${port}`}${req.url ?? "/"}`;
    let response: Response;
    try {
      response = await options.fetch(new Request(url, { method, headers, ...(body ? { body, duplex: "half" } : {}) } as RequestInit), timeouts);
    } catch {
      res.writeHead(500).end();
      return;
    }
    const out: [string, string][] = [];
    response.headers.forEach((value, name) => {
      if (name !== "set-cookie") out.push([name, value]);
    });
    for (const cookie of response.headers.getSetCookie()) out.push(["set-cookie", cookie]);
    res.writeHead(response.status, out.flat());
    if (!response.body || method === "HEAD") return void res.end();
    const reader = response.body.getReader();
    res.on("close", () => void reader.cancel().catch(() => {}));
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (!res.write(value)) await new Promise<void>((resolve) => res.once("drain", resolve));
      }
      res.end();
    } catch {
      res.destroy();
    }
  };
  const server = createServer((req, res) => void handle(req, res));
  const port = await listening(server, options.port, options.hostname);
  return {
    port,
    stop() {
      server.closeAllConnections();
      server.close();
    },
  };
}

export const nodeRuntime: AgentRuntime = {
  name: "node",
  connect,
  webSocket,
  connectUdp,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  serve,
  listen,
  bindUdp,
};
