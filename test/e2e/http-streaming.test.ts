/**
 * Bodies stream through the tunnel both ways as they are produced: a slow
 * request body reaches the local service piece by piece, a slow response
 * body reaches the visitor piece by piece, and Server-Sent Events arrive
 * one by one. Each test holds the producer until the other end has seen
 * the previous piece, so any buffering along the way makes it time out.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import net from "node:net";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";
import { deferred, within } from "../harness/wait.ts";

const WAIT_MS = 10_000;

/** A raw visitor connection: write bytes when you like, wait for bytes to arrive. */
class RawVisitor {
  readonly socket: net.Socket;
  private received = Buffer.alloc(0);
  private waiters: { pred: (b: Buffer) => boolean; resolve: () => void }[] = [];
  readonly closed: Promise<Buffer>;
  readonly connected: Promise<void>;

  constructor(port: number) {
    this.socket = net.connect(port, "127.0.0.1");
    this.connected = new Promise((resolve, reject) => {
      this.socket.once("connect", resolve);
      this.socket.once("error", reject);
    });
    this.socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      this.waiters = this.waiters.filter((w) => (w.pred(this.received) ? (w.resolve(), false) : true));
    });
    this.closed = new Promise((resolve) => this.socket.on("close", () => resolve(this.received)));
  }

  write(data: string | Buffer): void {
    this.socket.write(data);
  }

  get bytes(): Buffer {
    return this.received;
  }

  /** Waits until what has arrived so far satisfies `pred`. */
  until(pred: (b: Buffer) => boolean, what: string): Promise<void> {
    if (pred(this.received)) return Promise.resolve();
    const d = deferred();
    this.waiters.push({ pred, resolve: d.resolve });
    return within(d.promise, WAIT_MS, what);
  }

  destroy(): void {
    this.socket.destroy();
  }
}

/** De-chunks a complete chunked body. */
function dechunk(body: Buffer): Buffer {
  const parts: Buffer[] = [];
  let at = 0;
  for (;;) {
    const nl = body.indexOf("\r\n", at);
    const size = parseInt(body.subarray(at, nl).toString("latin1"), 16);
    if (nl < 0 || !Number.isFinite(size)) throw new Error("malformed chunked body");
    if (size === 0) return Buffer.concat(parts);
    parts.push(body.subarray(nl + 2, nl + 2 + size));
    at = nl + 2 + size + 2;
  }
}

function splitResponse(raw: Buffer): { head: string; body: Buffer } {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) throw new Error("no response head");
  const head = raw.subarray(0, end).toString("latin1");
  const body = raw.subarray(end + 4);
  return { head, body: /transfer-encoding:\s*chunked/i.test(head) ? dechunk(body) : body };
}

// -- the local service: each route is driven by gates the test opens -----------------------------

/** Request-body progress of the upload route: bytes seen so far, and who waits for how many. */
const upload = {
  bytes: 0,
  waiters: [] as { n: number; resolve: () => void }[],
  reached(n: number, what: string): Promise<void> {
    if (this.bytes >= n) return Promise.resolve();
    const d = deferred();
    this.waiters.push({ n, resolve: d.resolve });
    return within(d.promise, WAIT_MS, what);
  },
};
let responseGate = deferred();
let responseFinished = false;
let sseGate = deferred();

const RESPONSE_FIRST = "first part, sent before the rest exists\n";
const RESPONSE_REST = "the rest, sent after the visitor saw the first part\n".repeat(50);

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 0,
  async fetch(req) {
    const { pathname } = new URL(req.url);
    if (pathname === "/upload") {
      const hash = createHash("sha256");
      for await (const chunk of req.body!) {
        hash.update(chunk);
        upload.bytes += chunk.byteLength;
        upload.waiters = upload.waiters.filter((w) => (upload.bytes >= w.n ? (w.resolve(), false) : true));
      }
      return Response.json({ bytes: upload.bytes, sha256: hash.digest("hex") });
    }
    if (pathname === "/slow-response") {
      return new Response(
        (async function* () {
          yield new TextEncoder().encode(RESPONSE_FIRST);
          await responseGate.promise;
          yield new TextEncoder().encode(RESPONSE_REST);
          responseFinished = true;
        })(),
        { headers: { "content-type": "text/plain" } },
      );
    }
    if (pathname === "/events") {
      return new Response(
        (async function* () {
          yield new TextEncoder().encode("data: 1\n\n");
          await sseGate.promise;
          yield new TextEncoder().encode("data: 2\n\n");
        })(),
        { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } },
      );
    }
    return new Response("not found", { status: 404 });
  },
});

let tunnel: Tunnel;

beforeAll(async () => {
  tunnel = await withTunnel({ username: "streamer", upstream: `127.0.0.1:${upstream.port}`, args: ["--subdomain", "stream"] });
});

afterAll(async () => {
  responseGate.resolve();
  sseGate.resolve();
  await tunnel?.close();
  upstream.stop(true);
});

const host = () => `stream.localhost:${tunnel.server.edgePort}`;

test("a request body produced slowly reaches the local service piece by piece, and whole", async () => {
  const visitor = new RawVisitor(tunnel.server.edgePort);
  try {
    await within(visitor.connected, WAIT_MS, "connect to the edge");
    visitor.write(`POST /upload HTTP/1.1\r\nHost: ${host()}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`);
    const hash = createHash("sha256");
    let sent = 0;
    for (let i = 0; i < 8; i++) {
      const piece = Buffer.alloc(10_000 + i * 777, `piece-${i}|`);
      hash.update(piece);
      visitor.write(`${piece.byteLength.toString(16)}\r\n`);
      visitor.write(piece);
      visitor.write("\r\n");
      sent += piece.byteLength;
      // the next piece is only produced once the local service has this one: the body is not held back
      await upload.reached(sent, `the local service to receive ${sent} bytes of the request body`);
    }
    visitor.write("0\r\n\r\n");
    const { head, body } = splitResponse(await within(visitor.closed, WAIT_MS, "the response"));
    expect(head).toStartWith("HTTP/1.1 200");
    expect(JSON.parse(body.toString())).toEqual({ bytes: sent, sha256: hash.digest("hex") });
  } finally {
    visitor.destroy();
  }
});

test("a response body produced slowly reaches the visitor before the local service has finished it", async () => {
  responseGate = deferred();
  responseFinished = false;
  const visitor = new RawVisitor(tunnel.server.edgePort);
  try {
    await within(visitor.connected, WAIT_MS, "connect to the edge");
    visitor.write(`GET /slow-response HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
    await visitor.until((b) => b.includes(RESPONSE_FIRST), "the first part of the response");
    expect(responseFinished).toBe(false);
    expect(visitor.bytes.includes("sent after")).toBe(false);
    responseGate.resolve();
    const { head, body } = splitResponse(await within(visitor.closed, WAIT_MS, "the rest of the response"));
    expect(head).toStartWith("HTTP/1.1 200");
    expect(body.toString()).toBe(RESPONSE_FIRST + RESPONSE_REST);
    expect(responseFinished).toBe(true);
  } finally {
    responseGate.resolve();
    visitor.destroy();
  }
});

test("Server-Sent Events are delivered one by one as they are produced", async () => {
  sseGate = deferred();
  const res = await tunnel.fetch("/events", { headers: { accept: "text/event-stream" } });
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/event-stream");
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let text = "";
  const readUntil = async (want: string) => {
    while (!text.includes(want)) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value, { stream: true });
    }
  };
  try {
    // event 2 is only produced after event 1 has reached the visitor
    await within(readUntil("data: 1\n\n"), WAIT_MS, "the first event");
    expect(text).toBe("data: 1\n\n");
    sseGate.resolve();
    await within(readUntil("data: 2\n\n"), WAIT_MS, "the second event");
    expect(text).toBe("data: 1\n\ndata: 2\n\n");
    expect((await within(reader.read(), WAIT_MS, "the end of the stream")).done).toBe(true);
  } finally {
    sseGate.resolve();
    await reader.cancel().catch(() => {});
  }
});

test("the agent logs each streamed request once it has answered", async () => {
  await tunnel.agent.output.waitFor(/POST\s+\/upload\s+200\s+\d+ ms/, 5_000);
  await tunnel.agent.output.waitFor(/GET\s+\/events\s+200\s+\d+ ms/, 5_000);
});
