/**
 * HTTP/2 visitors on the plain public port (prior knowledge: the client
 * starts with the preface), through a real tunnel to real services: each
 * stream reaches the service as the HTTP/1.1 request an HTTP/1.1 visitor's
 * would be (X-Forwarded-*, burrow's own fields dropped, the body streamed
 * with credit, chunked when the client gave no length), and the service's
 * HTTP/1.1 answer comes back as HTTP/2 (chunked bodies decoded, their
 * trailer fields as trailers, a 101 refused, a broken body a reset stream),
 * with the response timeout, the metrics and the traffic meter as for
 * HTTP/1.1. Real clients: curl, nghttp, h2load; and a hand-made one where a
 * test needs frames curl would not send.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Socket } from "bun";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { H2LOAD, NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";
import { data, dataFrames, ErrorCode, headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

setDefaultTimeout(120_000);

const METRICS_TOKEN = "h2-visitors-metrics-token-0123456789";
const dir = mkdtempSync(join(tmpdir(), "burrow-h2-edge-"));
const upload = join(dir, "upload.bin");
const uploadBytes = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7919) % 251);
const md5 = (b: Uint8Array | string) => createHash("md5").update(b).digest("hex");

/** What the echo service saw of each request, by path. */
const seen = new Map<string, { method: string; headers: Headers; body: string }>();

/**
 * A raw HTTP/1.1 service for what Bun.serve would not send: a chunked body
 * with trailer fields, a 101 to a plain request, a body cut short.
 */
const raw = Bun.listen<{ buf: string }>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open: (s) => void (s.data = { buf: "" }),
    data(s: Socket<{ buf: string }>, bytes) {
      s.data.buf += Buffer.from(bytes).toString("latin1");
      const end = s.data.buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      const path = s.data.buf.split(" ")[1] ?? "";
      s.data.buf = "";
      // reads nothing more: its request's body waits, in the kernel, then in the agent, then at the visitor
      if (path.startsWith("/raw/stall")) return void s.pause();
      if (path.startsWith("/raw/trailers")) {
        s.write("HTTP/1.1 200 OK\r\nContent-Type: application/grpc\r\nTransfer-Encoding: chunked\r\nTrailer: grpc-status, grpc-message\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\ngrpc-status: 0\r\nGrpc-Message: all good\r\nContent-Length: 99\r\n\r\n");
      } else if (path.startsWith("/raw/switch")) {
        s.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
      } else if (path.startsWith("/raw/cut")) {
        s.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part of it");
        s.end();
      }
    },
  },
});

let t: Tunnel;
let host: string;
const curl = (...args: string[]) => run(["curl", "-sS", "--http2-prior-knowledge", "--resolve", `${host}:127.0.0.1`, ...args]);
const url = (path: string) => `http://${host}${path}`;
/** A request's fields for the hand-made client. */
const fieldsOf = (path: string, method = "GET", extra: [string, string][] = []): [string, string][] => [[":method", method], [":scheme", "http"], [":authority", host], [":path", path], ...extra];

beforeAll(async () => {
  if (!nghttp2Available()) throw new Error("nghttp and h2load are not installed: install Debian's nghttp2-client package (.ci/run installs it)");
  writeFileSync(upload, uploadBytes);
  t = await withTunnel({
    server: { args: ["--metrics-token", METRICS_TOKEN] },
    upstream: async (req) => {
      const u = new URL(req.url);
      if (u.pathname.startsWith("/bytes/")) return new Response(new Uint8Array(Number(u.pathname.slice(7))).fill(0x78));
      if (u.pathname === "/slow") return new Promise(() => {});
      if (u.pathname === "/empty") return new Response(null, { status: 204 });
      const body = new Uint8Array(await req.arrayBuffer());
      seen.set(u.pathname, { method: req.method, headers: req.headers, body: Buffer.from(body).toString("latin1") });
      if (u.pathname === "/echo") return new Response(body, { headers: { "x-length": String(body.byteLength) } });
      return new Response(`${req.method} ${u.pathname}${u.search}\n`, { headers: { "x-served": "yes", connection: "keep-alive" } });
    },
    args: ["--subdomain", "h2demo", "--route", `/raw=${raw.port}`, "--response-timeout", "1"],
  });
  host = `h2demo.localhost:${t.server.edgePort}`;
});
afterAll(async () => {
  await t?.close();
  raw.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

describe("curl and nghttp through a tunnel", () => {
  test("curl --http2-prior-knowledge: HTTP/2 all the way to the edge, the service's answer whole", async () => {
    const r = await curl("-i", "-w", "\\n%{http_version}", url("/hello?x=1"));
    expect(r.stdout).toStartWith("HTTP/2 200");
    expect(r.stdout).toContain("x-served: yes");
    // the HTTP/1.1 connection's own fields never reach an HTTP/2 client
    expect(r.stdout).not.toContain("connection:");
    expect(r.stdout).toEndWith("GET /hello?x=1\n\n2");
  });

  test("the service gets the request an HTTP/1.1 visitor's would be: Host, X-Forwarded-*, burrow's fields dropped", async () => {
    const r = await curl("-H", "X-Burrow-User: mallory", "-H", "X-Forwarded-For: 198.51.100.9", "-H", "Cookie: a=1", "-H", "Cookie: b=2", url("/headers"));
    expect(r.stdout).toBe("GET /headers\n");
    const h = seen.get("/headers")!.headers;
    expect(h.get("host")).toBe(host);
    expect(h.get("x-forwarded-for")).toBe("198.51.100.9, 127.0.0.1");
    expect(h.get("x-forwarded-proto")).toBe("http");
    expect(h.get("x-forwarded-host")).toBe(host);
    expect(h.get("x-real-ip")).toBe("127.0.0.1");
    expect(h.get("x-burrow-user")).toBeNull();
    expect(h.get("cookie")).toBe("a=1; b=2");
  });

  test("nghttp -v with a POST body: the body reaches the service and comes back, every frame read by nghttp", async () => {
    const small = join(dir, "small.txt");
    writeFileSync(small, "a request body, sent as DATA\n");
    const r = await run([NGHTTP, "-v", "-d", small, "-H", `:authority: ${host}`, `http://127.0.0.1:${t.server.edgePort}/echo`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(":status: 200");
    expect(r.stdout).toContain("a request body, sent as DATA");
    expect(r.stdout).toMatch(/recv DATA frame <length=\d+, flags=0x01/);
    expect(seen.get("/echo")!.method).toBe("POST");
  });

  test("a 3 MB upload echoed back and a 5 MB download, byte for byte: credit both ways through the tunnel", async () => {
    const echoed = join(dir, "echo.bin");
    const up = await curl("--data-binary", `@${upload}`, "-o", echoed, url("/echo"));
    expect(up.code).toBe(0);
    expect(md5(new Uint8Array(await Bun.file(echoed).arrayBuffer()))).toBe(md5(uploadBytes));
    const down = await curl("-o", join(dir, "down.bin"), "-w", "%{size_download}", url("/bytes/5000000"));
    expect(down.stdout).toBe("5000000");
  });

  test("a body without a length goes to the service chunked, whole", async () => {
    await using c = await rawH2(t.server.edgePort);
    const body = "x".repeat(100_000);
    const parts: Uint8Array[] = [settingsAck(), headers(1, fieldsOf("/echo", "POST"), false)];
    for (let at = 0; at < body.length; at += 10_000) parts.push(data(1, body.slice(at, at + 10_000), at + 10_000 >= body.length));
    c.send(...parts);
    await c.until(() => c.frames.heads.some((h) => h.stream === 1), 10_000, "the answer's head");
    expect(c.frames.status(1)).toBe("200");
    expect(c.frames.heads.find((h) => h.stream === 1)!.fields).toContainEqual(["x-length", "100000"]);
    expect(seen.get("/echo")!.headers.get("transfer-encoding")).toBe("chunked");
  });
});

describe("flow control, end to end", () => {
  test("a service that does not read holds back its own stream: its window is not reopened (a client sending past it is reset), and other streams go on", async () => {
    await using c = await rawH2(t.server.edgePort);
    // a client that ignores its window: 64 MB for a service that reads none of it
    const chunk = dataFrames(1, new Uint8Array(16_384 * 64));
    c.send(settingsAck(), headers(1, fieldsOf("/raw/stall", "POST"), false));
    for (let i = 0; i < 64; i++) c.send(chunk);
    await c.until(() => c.frames.resets().has(1), 20_000, "the stream reset for overrunning its window");
    expect(c.frames.resets().get(1)).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    c.send(headers(3, fieldsOf("/beside")));
    await c.until(() => c.frames.body(3) !== "", 10_000, "another stream on the connection");
    expect(c.frames.body(3)).toBe("GET /beside\n");
    expect(c.frames.goawayCode).toBeUndefined();
  });
});

describe("the service's HTTP/1.1 answer as HTTP/2", () => {
  test("a chunked body is decoded, and its trailer fields come as trailers (grpc-status), framing fields left out", async () => {
    await using c = await rawH2(t.server.edgePort);
    c.send(settingsAck(), headers(1, fieldsOf("/raw/trailers")));
    await c.until(() => c.frames.heads.filter((h) => h.stream === 1).length === 2, 10_000, "the head and the trailers");
    const [head, trailers] = c.frames.heads.filter((h) => h.stream === 1);
    expect(head!.fields).toContainEqual([":status", "200"]);
    expect(head!.fields.map(([n]) => n)).not.toContain("transfer-encoding");
    expect(c.frames.body(1)).toBe("hello world");
    expect(trailers!.endStream).toBe(true);
    expect(trailers!.fields).toEqual([
      ["grpc-status", "0"],
      ["grpc-message", "all good"],
    ]);
  });

  test("a 101 to a plain request is the 502 page; a body cut short resets the stream; the connection goes on", async () => {
    await using c = await rawH2(t.server.edgePort);
    c.send(settingsAck(), headers(1, fieldsOf("/raw/switch")), headers(3, fieldsOf("/raw/cut")));
    await c.until(() => c.frames.status(1) !== undefined && c.frames.resets().has(3), 10_000, "both answers");
    expect(c.frames.status(1)).toBe("502");
    expect(c.frames.body(1)).toContain("101 Switching Protocols to a request that asked for no upgrade");
    expect(c.frames.status(3)).toBe("200");
    expect(c.frames.resets().get(3)).toBe(ErrorCode.INTERNAL_ERROR);
    c.send(headers(5, fieldsOf("/after")));
    await c.until(() => c.frames.body(5) !== "", 10_000, "a stream after them");
    expect(c.frames.body(5)).toBe("GET /after\n");
    expect(c.frames.goawayCode).toBeUndefined();
  });

  test("HEAD and 204 end with their HEADERS", async () => {
    await using c = await rawH2(t.server.edgePort);
    c.send(settingsAck(), headers(1, fieldsOf("/bytes/10", "HEAD")), headers(3, fieldsOf("/empty")));
    await c.until(() => c.frames.heads.filter((h) => h.endStream).length === 2, 10_000, "both answers");
    const head = c.frames.heads.find((h) => h.stream === 1)!;
    expect(head.endStream).toBe(true);
    expect(head.fields).toContainEqual(["content-length", "10"]);
    expect(c.frames.body(1)).toBe("");
    expect(c.frames.status(3)).toBe("204");
  });

  test("a service slower than the tunnel's response timeout: the 502 page saying so", async () => {
    const r = await curl("-w", "\\n%{http_code} %{http_version}", url("/slow"));
    expect(r.stdout).toContain("took too long");
    expect(r.stdout).toEndWith("\n502 2");
  });
});

describe("WebSockets", () => {
  test("over HTTP/2 (extended CONNECT) they are refused with the stream alone; over HTTP/1.1 beside it they work", async () => {
    await using c = await rawH2(t.server.edgePort);
    c.send(settingsAck(), headers(1, [[":method", "CONNECT"], [":protocol", "websocket"], [":scheme", "http"], [":authority", host], [":path", "/ws"]], false));
    await c.until(() => c.frames.resets().has(1), 10_000, "the refusal");
    expect(c.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
    // a WebSocket over HTTP/1.1 to the same name, while the h2 connection is open
    const echo = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("no")), websocket: { message: (ws, m) => void ws.send(`echo ${m}`) } });
    try {
      await using w = await withTunnel({ server: t.server, username: "ws-owner", upstream: echo.port!, args: ["--subdomain", "h2ws"] });
      const ws = new WebSocket(`ws://127.0.0.1:${t.server.edgePort}/`, { headers: { host: `h2ws.localhost:${t.server.edgePort}` } } as unknown as string[]);
      const got = await new Promise<string>((resolve, reject) => {
        ws.onopen = () => ws.send("hi");
        ws.onmessage = (m) => resolve(String(m.data));
        ws.onerror = () => reject(new Error("websocket failed"));
        setTimeout(() => reject(new Error("no websocket answer in 10 s")), 10_000);
      });
      ws.close();
      expect(got).toBe("echo hi");
      c.send(headers(3, fieldsOf("/still")));
      await c.until(() => c.frames.body(3) !== "", 10_000, "the h2 connection still serving");
      expect(w.agent.subdomain).toBe("h2ws");
    } finally {
      echo.stop(true);
    }
  });
});

describe("load, metrics and traffic", () => {
  test("h2load -n 2000 -c 10 -m 10 through the tunnel: every request answered 2xx", async () => {
    // h2load resolves names itself: the edge's address, the tunnel's name as :authority
    const r = await run([H2LOAD, "-n", "2000", "-c", "10", "-m", "10", "-H", `:authority: ${host}`, `http://127.0.0.1:${t.server.edgePort}/load`]);
    console.log(r.stdout.split("\n").filter((l) => /^(finished in|requests:|status codes:|time for request:)/.test(l)).join("\n"));
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout");
    expect(r.stdout).toContain("status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx");
  });

  test("one connection's requests one after another reuse a kept tunnel stream: a thousand answers of 1 KiB, twice its credit, all through", async () => {
    const r = await run([H2LOAD, "-n", "1000", "-c", "1", "-m", "1", "-H", `:authority: ${host}`, `http://127.0.0.1:${t.server.edgePort}/bytes/1024`], 30_000);
    expect(r.stdout).toContain("requests: 1000 total, 1000 started, 1000 done, 1000 succeeded, 0 failed, 0 errored, 0 timeout");
  });

  test("streams are counted as h2 requests, and their bytes as the tunnel's traffic", async () => {
    const auth = { authorization: `Bearer ${METRICS_TOKEN}` };
    const before = await scrape(t.server.adminUrl, auth);
    const r = await curl("--data-binary", `@${upload}`, "-o", "/dev/null", "-w", "%{http_code}", url("/echo"));
    expect(r.stdout).toBe("200");
    const after = await scrape(t.server.adminUrl, auth);
    const delta = (s: string) => sample(after, s) - sample(before, s);
    expect(delta('burrow_visitor_requests_total{protocol="h2",status="2xx"}')).toBe(1);
    expect(delta('burrow_visitor_requests_total{protocol="http",status="2xx"}')).toBe(0);
    expect(delta('burrow_tunnel_bytes_total{direction="in"}')).toBeGreaterThanOrEqual(uploadBytes.byteLength);
    expect(delta('burrow_tunnel_bytes_total{direction="out"}')).toBeGreaterThanOrEqual(uploadBytes.byteLength);
  });
});
