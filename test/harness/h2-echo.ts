/**
 * A small HTTP/2 server on Bun.listen driven by src/http2's engine, for the
 * engine's tests with real clients (curl, nghttp, h2load) and hostile ones:
 * each stream is answered 200 with its method and path in fields, and its
 * body echoed back as it comes, with credit (a chunk's credit returns once
 * the echo took it), or, with no body, "METHOD PATH\n". A few paths do more:
 *
 *   /bytes/N   N bytes of "x" as the body (for windows and stalls)
 *   /http1     the request as the HTTP/1.1 head an agent would get
 *   /hold      a response head, then nothing until the client goes
 *   /page      an HTML page (for a browser to land on)
 *
 * Plain (prior knowledge) or TLS with ALPN offering h2. The server keeps the
 * connections it made, so a test can look at their streams and memory.
 */
import type { Socket, TCPSocketListener } from "bun";
import { Http2ServerConnection, type Http2Handler } from "../../src/http2/connection.ts";
import { http1HeadText } from "../../src/http2/http1.ts";
import { DEFAULT_H2_LIMITS, type Http2Limits } from "../../src/http2/limits.ts";
import type { H2Stream } from "../../src/http2/stream.ts";
import { PendingWrites } from "../../src/sockets/pending-writes.ts";

interface SocketData {
  conn?: Http2ServerConnection;
  /** The socket can take bytes again. */
  drained?: () => void;
}

export interface H2EchoServer extends AsyncDisposable {
  port: number;
  /** The connections open now. */
  connections: Set<Http2ServerConnection>;
  /** Streams handed to the handler so far, and the reset codes the handler was told of. */
  requests: number;
  resets: string[];
  /** ALPN protocols negotiated, one per TLS connection, in order. */
  alpn: (string | false | null)[];
  stop(): Promise<void>;
}

export interface H2EchoOptions {
  limits?: Partial<Http2Limits>;
  tls?: { cert: string; key: string };
}

/** ALPN's wire form (length-prefixed names), which Bun's ALPNProtocols takes: h2 only. */
const ALPN_H2 = new Uint8Array([2, ...new TextEncoder().encode("h2")]);

function serve(stream: H2Stream, server: H2EchoServer): void {
  server.requests++;
  const { method, path = "" } = stream.request;
  stream.onReset = (code) => void server.resets.push(code);
  const head: [string, string][] = [["content-type", "text/plain"], ["x-method", method], ["x-path", path]];
  if (path.startsWith("/bytes/")) {
    const n = Number(path.slice("/bytes/".length));
    stream.respond(200, [...head, ["content-length", String(n)]]);
    stream.write(new Uint8Array(n).fill(0x78));
    stream.end();
    return;
  }
  if (path === "/http1") {
    stream.respond(200, head);
    stream.write(Buffer.from(http1HeadText(stream.request, stream.hasBody), "latin1"));
    stream.end();
    return;
  }
  if (path === "/hold") return stream.respond(200, head);
  if (path === "/page") {
    stream.respond(200, [["content-type", "text/html; charset=utf-8"]]);
    stream.write(Buffer.from("<!doctype html><title>h2</title><p>over HTTP/2</p>"));
    stream.end();
    return;
  }
  if (!stream.hasBody) {
    stream.respond(200, head, false);
    stream.write(Buffer.from(`${method} ${path}\n`));
    stream.end();
    return;
  }
  stream.respond(200, head);
  let owed = 0;
  stream.onDrain = () => {
    stream.consumed(owed);
    owed = 0;
  };
  stream.onData = (chunk) => {
    // the chunk is a view of the socket's read: the echo keeps its own copy while it waits
    if (stream.write(chunk.slice())) stream.consumed(chunk.byteLength);
    else owed += chunk.byteLength;
  };
  stream.onTrailers = (fields) => stream.end(fields.filter(([n]) => n.startsWith("x-")));
  stream.onEnd = () => stream.end();
}

export async function startH2Echo(opts: H2EchoOptions = {}): Promise<H2EchoServer> {
  const limits: Http2Limits = { ...DEFAULT_H2_LIMITS, ...opts.limits };
  let listener: TCPSocketListener<SocketData> | undefined;
  const server: H2EchoServer = {
    port: 0,
    connections: new Set(),
    requests: 0,
    resets: [],
    alpn: [],
    async stop() {
      for (const c of server.connections) c.close();
      listener?.stop(true);
    },
    [Symbol.asyncDispose]() {
      return server.stop();
    },
  };
  const start = (socket: Socket<SocketData>) => {
    const out = new PendingWrites(socket);
    // io.close(): the socket ends once what waits in `out` is written
    let closeAfter = false;
    const handler: Http2Handler = { request: (s) => serve(s, server), closed: () => server.connections.delete(conn) };
    const conn = new Http2ServerConnection(
      {
        write: (bytes) => out.write(bytes),
        close: () => (out.empty ? socket.end() : void (closeAfter = true)),
        terminate: () => socket.terminate(),
        peer: { address: socket.remoteAddress, port: 0 },
      },
      limits,
      handler,
    );
    const drained = () => {
      if (!out.flush()) return;
      if (closeAfter) return void socket.end();
      conn.drained();
    };
    socket.data = { conn, drained };
    server.connections.add(conn);
  };
  listener = Bun.listen<SocketData>({
    hostname: "127.0.0.1",
    port: 0,
    ...(opts.tls ? { tls: { cert: opts.tls.cert, key: opts.tls.key, ALPNProtocols: ALPN_H2 } } : {}),
    socket: {
      open(socket) {
        socket.data = {};
        if (!opts.tls) start(socket);
      },
      handshake(socket, success) {
        server.alpn.push(socket.alpnProtocol);
        if (!success) return void socket.end();
        start(socket);
      },
      data(socket, bytes) {
        socket.data.conn?.received(bytes);
      },
      drain(socket) {
        socket.data.drained?.();
      },
      end(socket) {
        socket.data.conn?.ended();
      },
      close(socket) {
        socket.data.conn?.closed();
      },
      error(socket) {
        socket.data.conn?.closed();
      },
    },
  });
  server.port = listener.port;
  return server;
}
