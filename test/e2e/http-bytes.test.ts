/**
 * The HTTP path is faithful to the byte: a raw local service writes exactly
 * the bytes each test means and records exactly what it was sent, and a raw
 * visitor socket reads exactly what the edge wrote. Lengths stay lengths,
 * reason phrases and header case stay as sent, Expect: 100-continue is the
 * service's to answer, HTTP/1.0 stays 1.0, the response timeout is for the
 * head only, and after a 101 the connection is a pipe of bytes both ways.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import type { Socket, TCPSocketListener } from "bun";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

/** What the service does with a request: its raw head (CRLFs included) decides. */
type Script = (socket: Socket<Conn>, head: string, conn: Conn) => void;

interface Conn {
  buffer: Buffer;
  /** Every byte received on this connection. */
  received: Buffer[];
  scripted: boolean;
  /** Writes more when the socket drains (a script that sends more than it takes at once). */
  pump?: () => void;
  /** Called with bytes that come after the head. */
  more?: (bytes: Buffer) => void;
}

/** Writes `all` to `s` as the socket takes it. */
function send(s: Socket<Conn>, all: Buffer): void {
  let at = 0;
  s.data.pump = () => {
    while (at < all.byteLength) {
      const n = s.write(all.subarray(at, at + 256 * 1024));
      if (n <= 0) return;
      at += n;
    }
  };
  s.data.pump();
}

const scripts = new Map<string, Script>();
/** Bytes each scripted path's connection received, kept for the tests to read. */
const receivedBy = new Map<string, Conn>();

const service: TCPSocketListener<Conn> = Bun.listen<Conn>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open: (s) => void (s.data = { buffer: Buffer.alloc(0), received: [], scripted: false }),
    data(s, bytes) {
      const c = s.data;
      c.received.push(Buffer.from(bytes));
      if (c.scripted) return void c.more?.(Buffer.from(bytes));
      c.buffer = Buffer.concat([c.buffer, bytes]);
      const end = c.buffer.indexOf("\r\n\r\n");
      if (end < 0) return;
      const head = c.buffer.subarray(0, end + 4).toString("latin1");
      const path = head.split(" ")[1]!.split("?")[0]!;
      const script = scripts.get(path);
      if (!script) return void s.end("HTTP/1.1 404 Nope\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
      c.scripted = true;
      receivedBy.set(path, c);
      script(s, head, c);
      const rest = c.buffer.subarray(end + 4);
      if (rest.byteLength > 0) c.more?.(Buffer.from(rest));
    },
    drain: (s) => s.data.pump?.(),
  },
});

let tunnel: Tunnel;
let host: string;

beforeAll(async () => {
  // --response-timeout 2: the head must come within 2 s; bodies may take longer
  tunnel = await withTunnel({ username: "bytes", upstream: service.port, args: ["--subdomain", "bytes", "--response-timeout", "2"] });
  host = `bytes.localhost:${tunnel.server.edgePort}`;
});
afterAll(async () => {
  await tunnel?.close();
  service.stop(true);
});

/** A raw visitor: writes `request`, reads until the connection closes (or `until` says enough), at most `timeoutMs`. */
function visit(request: string | Buffer, opts: { until?: () => boolean; timeoutMs?: number; onData?: (s: net.Socket, chunk: Buffer) => void; keep?: boolean } = {}): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const socket = net.connect(tunnel.server.edgePort, "127.0.0.1", () => socket.write(request));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`visitor got ${size} bytes and then nothing: ${Buffer.concat(chunks).toString("latin1").slice(0, 300)}`));
    }, opts.timeoutMs ?? 10_000);
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      resolve(Buffer.concat(chunks));
    };
    socket.on("data", (c: Buffer) => {
      if (opts.keep !== false) chunks.push(c);
      size += c.byteLength;
      opts.onData?.(socket, c);
      if (opts.until?.()) done();
    });
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("close", done);
  });
}

const headOf = (b: Buffer) => b.subarray(0, b.indexOf("\r\n\r\n") + 4).toString("latin1");

test("a 10 MiB response keeps its Content-Length, and every byte arrives", async () => {
  const body = Buffer.alloc(10 * 1024 * 1024);
  for (let i = 0; i < body.byteLength; i += 4096) body.writeUInt32BE(i, i);
  scripts.set("/big", (s) => send(s, Buffer.concat([Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${body.byteLength}\r\nContent-Type: application/octet-stream\r\n\r\n`), body])));
  const got = await visit(`GET /big HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { timeoutMs: 30_000 });
  const head = headOf(got);
  expect(head).toContain(`Content-Length: ${body.byteLength}\r\n`);
  expect(head).not.toMatch(/transfer-encoding/i);
  expect(Buffer.compare(got.subarray(head.length), body)).toBe(0);
});

test("reason phrase, header case and order, repeated fields: the response head as the service sent it", async () => {
  const sent = "HTTP/1.1 299 Quite Fine Indeed\r\nX-CamelCase: one\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\nx-lower: two\r\nContent-Length: 2\r\n\r\n";
  scripts.set("/case", (s) => void s.write(`${sent}ok`));
  const got = await visit(`GET /case HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
  expect(got.toString("latin1")).toBe(`${sent}ok`);
});

test("the request reaches the service as the visitor sent it: header case and order, X-Forwarded-* added after them", async () => {
  let head = "";
  scripts.set("/req", (s, h) => {
    head = h;
    s.write("HTTP/1.1 204 No Content\r\n\r\n");
  });
  await visit(`GET /req?q=%41 HTTP/1.1\r\nHost: ${host}\r\nX-CamelCase: 1\r\naccept: */*\r\nX-Dup: a\r\nX-Dup: b\r\nConnection: close\r\n\r\n`);
  const lines = head.split("\r\n");
  expect(lines[0]).toBe("GET /req?q=%41 HTTP/1.1");
  expect(lines.slice(1, 6)).toEqual([`Host: ${host}`, "X-CamelCase: 1", "accept: */*", "X-Dup: a", "X-Dup: b"]);
  expect(lines.some((l) => /^X-Forwarded-For: 127\.0\.0\.1$/.test(l))).toBe(true);
});

test("a head sent at once and a small body after the response timeout arrives as sent: the timeout is for the head", async () => {
  scripts.set("/slow-body", (s) => {
    s.write("HTTP/1.1 200 OK\r\nContent-Length: 300\r\n\r\n");
    setTimeout(() => s.write(Buffer.alloc(300, "z")), 3_000); // the tunnel's response timeout is 2 s
  });
  const got = await visit(`GET /slow-body HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { timeoutMs: 15_000 });
  expect(headOf(got)).toStartWith("HTTP/1.1 200 OK\r\nContent-Length: 300\r\n");
  expect(got.subarray(headOf(got).length).toString()).toBe("z".repeat(300));
});

test("Expect: 100-continue refused by the service with 401: the visitor gets no 100 Continue and the service no body", async () => {
  scripts.set("/upload", (s) => void s.write("HTTP/1.1 401 Unauthorized\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope"));
  let sentBody = false;
  let so = "";
  const got = await visit(`PUT /upload HTTP/1.1\r\nHost: ${host}\r\nExpect: 100-continue\r\nContent-Length: 1048576\r\n\r\n`, {
    onData(socket, chunk) {
      so += chunk.toString("latin1");
      // a client sends its body only after a 100 Continue
      if (!sentBody && so.startsWith("HTTP/1.1 100")) {
        sentBody = true;
        socket.write(Buffer.alloc(1048576, "b"));
      }
    },
  });
  expect(got.toString("latin1")).toStartWith("HTTP/1.1 401 Unauthorized\r\n");
  expect(got.toString("latin1")).not.toContain("100 Continue");
  expect(sentBody).toBe(false);
  const received = Buffer.concat(receivedBy.get("/upload")!.received).toString("latin1");
  expect(received.slice(received.indexOf("\r\n\r\n") + 4)).toBe("");
});

test("Expect: 100-continue accepted: the service's 100 reaches the visitor, then the body reaches the service", async () => {
  scripts.set("/accept", (s, _h, c) => {
    s.write("HTTP/1.1 100 Continue\r\n\r\n");
    let got = 0;
    c.more = (bytes) => {
      got += bytes.byteLength;
      if (got === 5) s.write("HTTP/1.1 201 Created\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
    };
  });
  let sentBody = false;
  let so = "";
  const got = await visit(`PUT /accept HTTP/1.1\r\nHost: ${host}\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n`, {
    onData(socket, chunk) {
      so += chunk.toString("latin1");
      if (!sentBody && so.startsWith("HTTP/1.1 100 Continue\r\n\r\n")) {
        sentBody = true;
        socket.write("hello");
      }
    },
  });
  expect(got.toString("latin1")).toStartWith("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\n");
});

test("HTTP/1.0 reaches the service as 1.0, and a 1.0 response without a length ends with the connection", async () => {
  let requestLine = "";
  scripts.set("/old", (s, h) => {
    requestLine = h.split("\r\n")[0]!;
    s.write("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nno length here, ");
    setTimeout(() => s.end("until the end"), 100);
  });
  const got = await visit(`GET /old HTTP/1.0\r\nHost: ${host}\r\n\r\n`);
  expect(requestLine).toBe("GET /old HTTP/1.0");
  expect(got.toString("latin1")).toBe("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nno length here, until the end");
});

test("a chunked request body reaches the service still chunked, extensions and trailers as sent", async () => {
  const body = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";
  scripts.set("/chunks", (s, _h, c) => {
    let got = "";
    c.more = (bytes) => {
      got += bytes.toString("latin1");
      if (got.endsWith("\r\n\r\n")) s.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Back: 1\r\n\r\n");
    };
  });
  const got = await visit(`POST /chunks HTTP/1.1\r\nHost: ${host}\r\nTransfer-Encoding: chunked\r\n\r\n${body}`);
  const received = Buffer.concat(receivedBy.get("/chunks")!.received).toString("latin1");
  expect(received.slice(received.indexOf("\r\n\r\n") + 4)).toBe(body);
  expect(got.toString("latin1")).toEndWith("\r\n\r\n3;x=y\r\nabc\r\n0\r\nX-Back: 1\r\n\r\n");
});

test("keep-alive: three requests on one connection, each answered in order; nothing past a response's end reaches the visitor", async () => {
  scripts.set("/ka", (s, _h, c) => {
    // answers this request and each next one on the same connection; the first answer carries junk after its end
    const answer = (n: number) => s.write(`HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nk${n}${n === 1 ? "JUNK" : ""}`);
    let n = 1;
    answer(n);
    c.more = (bytes) => {
      if (bytes.includes("\r\n\r\n")) answer(++n);
    };
  });
  const req = `GET /ka HTTP/1.1\r\nHost: ${host}\r\n\r\n`;
  const got = await visit(req + req + `GET /ka HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`, { timeoutMs: 10_000 });
  const text = got.toString("latin1");
  expect(text.match(/HTTP\/1\.1 200 OK/g)?.length).toBe(3);
  expect(text).not.toContain("JUNK");
});

test("a WebSocket is piped as bytes after the 101: a 64 MiB message passes unchanged", async () => {
  const size = 64 * 1024 * 1024;
  // an echo service of raw bytes once it has said 101
  scripts.set("/ws", (s, _h, c) => {
    s.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
    const queue: Buffer[] = [];
    c.pump = () => {
      while (queue.length > 0) {
        const next = queue[0]!;
        const n = s.write(next);
        if (n < 0) return;
        if (n < next.byteLength) {
          queue[0] = next.subarray(n);
          return;
        }
        queue.shift();
      }
    };
    c.more = (bytes) => {
      queue.push(bytes);
      c.pump!();
    };
  });
  // a made-up frame of 64 MiB: the path carries bytes, it does not read frames
  const payload = Buffer.alloc(size);
  for (let i = 0; i < size; i += 65536) payload.writeUInt32BE(i >>> 0, i);
  let head = "";
  let pending = Buffer.alloc(0);
  let echoed = 0;
  const hash = new Bun.CryptoHasher("sha256");
  await visit(`GET /ws HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`, {
    timeoutMs: 60_000,
    keep: false,
    onData(socket, chunk) {
      if (!head) {
        pending = Buffer.concat([pending, chunk]);
        const end = pending.indexOf("\r\n\r\n");
        if (end < 0) return;
        head = pending.subarray(0, end + 4).toString("latin1");
        chunk = pending.subarray(end + 4);
        socket.write(payload);
      }
      hash.update(chunk);
      echoed += chunk.byteLength;
    },
    until: () => echoed >= size,
  });
  expect(head).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
  expect(echoed).toBe(size);
  expect(hash.digest("hex")).toBe(new Bun.CryptoHasher("sha256").update(payload).digest("hex"));
}, 90_000);

test("a fast sender after a 101 is held back by credit, not cut: every byte arrives, and the server's memory stays bounded", async () => {
  // 256 MiB by default; BURROW_LONG_TESTS=1 sends 1 GiB
  const total = (process.env.BURROW_LONG_TESTS ? 1024 : 256) * 1024 * 1024;
  let received = 0;
  const hash = new Bun.CryptoHasher("sha256");
  const allIn = Promise.withResolvers<void>();
  scripts.set("/sink", (s, _h, c) => {
    s.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
    // a slow start: the service reads nothing for a second, while the visitor sends all it can
    s.pause();
    setTimeout(() => s.resume(), 1_000);
    c.more = (bytes) => {
      hash.update(bytes);
      received += bytes.byteLength;
      if (received >= total) allIn.resolve();
    };
  });
  const rssBefore = Number((await Bun.file(`/proc/${tunnel.server.proc.pid}/status`).text()).match(/VmRSS:\s+(\d+)/)![1]) * 1024;
  let peak = rssBefore;
  const sampler = setInterval(async () => {
    const rss = Number((await Bun.file(`/proc/${tunnel.server.proc.pid}/status`).text()).match(/VmRSS:\s+(\d+)/)![1]) * 1024;
    peak = Math.max(peak, rss);
  }, 100);
  const block = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < block.byteLength; i += 4) block.writeUInt32BE(i, i);
  const sent = new Bun.CryptoHasher("sha256");
  const socket = net.connect(tunnel.server.edgePort, "127.0.0.1");
  socket.on("error", () => {});
  try {
    await new Promise<void>((resolve) => socket.on("connect", () => resolve()));
    socket.write(`GET /sink HTTP/1.1\r\nHost: ${host}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n`);
    await new Promise<void>((resolve) => socket.once("data", () => resolve()));
    // as fast as the socket takes it: the edge must hold the visitor back, not buffer it
    for (let at = 0; at < total; at += block.byteLength) {
      sent.update(block);
      if (!socket.write(block)) await new Promise<void>((resolve) => socket.once("drain", () => resolve()));
    }
    await within(allIn.promise, 120_000, "every byte at the service");
  } finally {
    clearInterval(sampler);
    socket.destroy();
  }
  expect(received).toBe(total);
  expect(hash.digest("hex")).toBe(sent.digest("hex"));
  // credit bounds what the edge holds: far less than what was sent
  expect(peak - rssBefore).toBeLessThan(128 * 1024 * 1024);
}, 180_000);
