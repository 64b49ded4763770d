/**
 * An http tunnel whose service speaks HTTP/2 (--upstream-protocol h2c): the
 * HTTP/1.1 request the edge sends on an h1 stream reaches the service as an
 * HTTP/2 request, and its HTTP/2 answer comes back into the stream as the
 * HTTP/1.1 response an HTTP/1.1 service would have given (status line,
 * fields, the body framed so its end is known, trailers as the last chunk's
 * trailer fields). The service is a hand-made one that records the frames
 * it is sent and answers exactly as each test says, then real ones: the
 * HTTP/2 engine of src/http2/ and nghttpd (Debian's nghttp2-server).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { data, FrameType, headers } from "../harness/h2-frames.ts";
import { rawH2Server, type RawServerConn } from "../harness/h2-raw-server.ts";
import { CaptureStore } from "../../src/agent/inspector/store.ts";
import { startNghttpd } from "../harness/nghttpd.ts";
import { within } from "../protocol/support.ts";
import { cleanedUp, fetchThrough, requestHead, until, visit, WAIT_MS, type TestTunnel } from "./raw-service.ts";

const { service: rawService, tunnel } = cleanedUp();
const h2c = (port: number): TestTunnel => tunnel(port, { target: { upstreamProtocol: "h2c" } });

/** Answers each request head with `answer(conn, stream, fields)`. */
function service(answer: (conn: RawServerConn, stream: number, fields: [string, string][]) => void) {
  return rawH2Server({ onHead: (conn, head) => answer(conn, head.stream, head.fields) });
}

const ok = (conn: RawServerConn, stream: number, body = "hello", extra: [string, string][] = []) =>
  conn.send(headers(stream, [[":status", "200"], ["content-type", "text/plain"], ...extra], false), data(stream, body, true));

describe("the request, as the service gets it", () => {
  test("the request line and Host become pseudo-header fields; the HTTP/1.1 connection's fields stay out, te: trailers goes in", async () => {
    await using svc = service((conn, stream) => ok(conn, stream));
    const t = h2c(svc.port);
    const head = requestHead("GET", "/a%20b?q=1", [
      ["Host", "visitor.example"],
      ["X-Mixed", "One"],
      ["Connection", "keep-alive, X-Hop"],
      ["X-Hop", "dropped"],
      ["Keep-Alive", "timeout=5"],
      ["TE", "gzip"],
      ["Cookie", "a=1; b=2"],
      ["X-Forwarded-For", "203.0.113.9"],
    ]);
    const res = await fetchThrough(t, { head });
    expect(res.status).toBe(200);
    expect(svc.conns[0]!.sent.heads[0]!.fields).toEqual([
      [":method", "GET"],
      [":scheme", "http"],
      [":authority", "visitor.example"],
      [":path", "/a%20b?q=1"],
      ["x-mixed", "One"],
      ["cookie", "a=1; b=2"],
      ["x-forwarded-for", "203.0.113.9"],
      ["te", "trailers"],
    ]);
    // a GET has no body: its HEADERS end the stream
    expect(svc.conns[0]!.sent.heads[0]!.endStream).toBe(true);
  });

  test("a Content-Length body and a chunked one reach the service as DATA, their framing taken off; the length stays", async () => {
    await using svc = service((conn, stream) => ok(conn, stream));
    const t = h2c(svc.port);
    await fetchThrough(t, { head: requestHead("PUT", "/one", [["Host", "h"], ["Content-Length", "11"]]), body: ["hello", " world"] });
    const chunked = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Sum: 10\r\n\r\n";
    await fetchThrough(t, { head: requestHead("POST", "/two", [["Host", "h"], ["Transfer-Encoding", "chunked"]]), body: [chunked.slice(0, 7), chunked.slice(7)] });
    const sent = svc.conns[0]!.sent;
    const [one, two] = sent.heads;
    expect(one!.fields).toContainEqual(["content-length", "11"]);
    expect(two!.fields.map(([n]) => n)).not.toContain("transfer-encoding");
    expect(sent.body(one!.stream)).toBe("hello world");
    expect(sent.body(two!.stream)).toBe("hello world");
    // each ends its stream: END_STREAM on its last DATA frame
    for (const h of [one!, two!]) expect(sent.of(FrameType.DATA).filter((f) => f.stream === h.stream).at(-1)!.flags & 0x1).toBe(1);
  });

  test("a Host rewritten by the tunnel (--host-header) is the :authority", async () => {
    await using svc = service((conn, stream) => ok(conn, stream));
    const t = tunnel(svc.port, { target: { upstreamProtocol: "h2c", hostHeader: "inner.local" } });
    expect((await fetchThrough(t)).status).toBe(200);
    expect(svc.conns[0]!.sent.heads[0]!.fields).toContainEqual([":authority", "inner.local"]);
  });
});

describe("the answer, as the edge gets it", () => {
  test("no Content-Length: chunked, each DATA frame a chunk; the trailers are the last chunk's trailer fields", async () => {
    await using svc = service((conn, stream) =>
      conn.send(
        headers(stream, [[":status", "200"], ["content-type", "application/grpc"], ["set-cookie", "a=1"], ["set-cookie", "b=2"]], false),
        data(stream, "abc"),
        data(stream, "de"),
        headers(stream, [["grpc-status", "0"], ["grpc-message", "fine"]], true),
      ),
    );
    const res = await fetchThrough(h2c(svc.port));
    expect(res.text).toBe(
      "HTTP/1.1 200 OK\r\ncontent-type: application/grpc\r\nset-cookie: a=1\r\nset-cookie: b=2\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\ngrpc-status: 0\r\ngrpc-message: fine\r\n\r\n",
    );
  });

  test("a Content-Length answer goes as is; a head that ends the stream says content-length: 0; HEAD, 204 and 304 have no body", async () => {
    await using svc = service((conn, stream, fields) => {
      const path = fields.find(([n]) => n === ":path")![1];
      if (path === "/length") return conn.send(headers(stream, [[":status", "201"], ["content-length", "5"]], false), data(stream, "hel"), data(stream, "lo", true));
      if (path === "/only-head") return conn.send(headers(stream, [[":status", "200"], ["grpc-status", "3"]], true));
      if (path === "/no-content") return conn.send(headers(stream, [[":status", "204"]], true));
      conn.send(headers(stream, [[":status", "200"], ["content-length", "99"]], true)); // HEAD
    });
    const t = h2c(svc.port);
    expect((await fetchThrough(t, { head: requestHead("GET", "/length") })).text).toBe("HTTP/1.1 201 Created\r\ncontent-length: 5\r\n\r\nhello");
    expect((await fetchThrough(t, { head: requestHead("GET", "/only-head") })).text).toBe("HTTP/1.1 200 OK\r\ngrpc-status: 3\r\ncontent-length: 0\r\n\r\n");
    expect((await fetchThrough(t, { head: requestHead("GET", "/no-content") })).text).toBe("HTTP/1.1 204 No Content\r\n\r\n");
    expect((await fetchThrough(t, { head: requestHead("HEAD", "/head") })).text).toBe("HTTP/1.1 200 OK\r\ncontent-length: 99\r\n\r\n");
  });

  test("to an HTTP/1.0 request, which cannot read chunks, a body without a length ends with the stream (connection: close), its trailers dropped", async () => {
    await using svc = service((conn, stream) => conn.send(headers(stream, [[":status", "200"]], false), data(stream, "old"), headers(stream, [["x-t", "1"]], true)));
    const res = await fetchThrough(h2c(svc.port), { head: requestHead("GET", "/", [["Host", "h"]], "HTTP/1.0") });
    expect(res.text).toBe("HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nold");
  });

  test("informational answers go on before the final one (a 103's links with it)", async () => {
    await using svc = service((conn, stream) => {
      conn.send(headers(stream, [[":status", "103"], ["link", "</a.css>; rel=preload"]], false));
      ok(conn, stream, "x");
    });
    const res = await fetchThrough(h2c(svc.port));
    expect(res.text).toStartWith("HTTP/1.1 103 Early Hints\r\nlink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 200 OK\r\n");
    expect(res.status).toBe(200);
  });

  test("a status HTTP/1.1 has no reason phrase for goes without one", async () => {
    await using svc = service((conn, stream) => conn.send(headers(stream, [[":status", "299"], ["content-length", "0"]], true)));
    expect((await fetchThrough(h2c(svc.port))).text).toBe("HTTP/1.1 299\r\ncontent-length: 0\r\n\r\n");
  });

  test("the inspector sees the request and the answer as they passed: bodies without framing, the service's fields", async () => {
    await using svc = service((conn, stream) => conn.send(headers(stream, [[":status", "201"], ["x-from", "h2"]], false), data(stream, "made"), headers(stream, [["grpc-status", "0"]], true)));
    const store = new CaptureStore(10);
    const t = tunnel(svc.port, { target: { upstreamProtocol: "h2c" }, inspector: store });
    await fetchThrough(t, { head: requestHead("POST", "/make", [["Host", "h"], ["Transfer-Encoding", "chunked"]]), body: ["4\r\nnew!\r\n0\r\n\r\n"] });
    const [capture] = store.list();
    expect(capture!.state).toBe("done");
    expect(capture!.status).toBe(201);
    expect(capture!.responseHeaders).toContainEqual(["x-from", "h2"]);
    expect(Buffer.from(capture!.requestBody.bytes()).toString()).toBe("new!");
    expect(Buffer.from(capture!.responseBody.bytes()).toString()).toBe("made");
  });

  test("the request log and the response head: the answer's status, once", async () => {
    await using svc = service((conn, stream) => ok(conn, stream));
    const t = h2c(svc.port);
    await fetchThrough(t, { head: requestHead("GET", "/logged") });
    expect(t.logs).toEqual([expect.objectContaining({ method: "GET", path: "/logged", status: 200 })]);
  });
});

describe("Expect: 100-continue", () => {
  test("the body waits for the service's 100, which goes on to the visitor; a service that answers at once gets no body", async () => {
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        const path = head.fields.find(([n]) => n === ":path")![1];
        if (path === "/refused") return conn.send(headers(head.stream, [[":status", "401"], ["content-length", "0"]], true));
        if (!head.endStream) conn.send(headers(head.stream, [[":status", "100"]], false));
      },
      onFrame: (conn, f) => {
        if (f.type === FrameType.DATA && f.flags & 0x1) conn.send(headers(f.stream, [[":status", "200"], ["content-length", "2"]], false), data(f.stream, "ok", true));
      },
    });
    const t = h2c(svc.port);
    const expecting = (path: string) => requestHead("PUT", path, [["Host", "h"], ["Expect", "100-continue"], ["Content-Length", "4"]]);
    const ok = await fetchThrough(t, { head: expecting("/upload"), body: ["data"] });
    expect(ok.text).toBe("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    const refused = await fetchThrough(t, { head: expecting("/refused"), body: ["data"] });
    expect(refused.text).toBe("HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n");
    const sent = svc.conns[0]!.sent;
    const [upload, denied] = sent.heads;
    expect(upload!.fields).toContainEqual(["expect", "100-continue"]);
    expect(sent.body(upload!.stream)).toBe("data");
    expect(sent.body(denied!.stream)).toBe("");
  });
});

describe("a kept stream: a visitor connection's requests one after another", () => {
  test("each request is a stream of the one connection, and the tunnel stream carries the next after each answer", async () => {
    await using svc = service((conn, stream, fields) => ok(conn, stream, fields.find(([n]) => n === ":path")![1]));
    const t = h2c(svc.port);
    const stream = t.pair.edge.open({ tunnel: "t1", kind: "h1", remote: "127.0.0.1:1", head: requestHead("GET", "/1"), keep: true }, false);
    const got: Buffer[] = [];
    stream.onData = (chunk) => {
      got.push(Buffer.from(chunk));
      stream.consumed(chunk.byteLength);
    };
    const answered = (n: number) => svc.until(() => [...Buffer.concat(got).toString("latin1").matchAll(/0\r\n\r\n/g)].length >= n, 5_000, `${n} answers`);
    await answered(1);
    stream.write(Buffer.from(requestHead("GET", "/2"), "latin1"));
    await answered(2);
    const answer = (path: string) => `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n2\r\n${path}\r\n0\r\n\r\n`;
    expect(Buffer.concat(got).toString("latin1")).toBe(answer("/1") + answer("/2"));
    expect(svc.conns).toHaveLength(1);
    expect(svc.conns[0]!.sent.heads.map((h) => h.stream)).toEqual([1, 3]);
    stream.end();
  });
});

describe("a request HTTP/2 cannot carry", () => {
  test("a WebSocket's upgrade goes over HTTP/1.1 to the same address, and the switched connection is piped as always", async () => {
    // a service on one port that takes HTTP/1.1's upgrade (as Go's h2c handler, or any server speaking both, does)
    const svc = rawService(() => {}, {
      data: (socket, bytes) => {
        if (bytes.toString("latin1").startsWith("GET /ws HTTP/1.1")) {
          socket.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n");
        } else socket.write(bytes); // after the switch: an echo
        return true;
      },
    });
    const t = h2c(svc.port);
    const upgrade = requestHead("GET", "/ws", [["Host", "h"], ["Connection", "Upgrade"], ["Upgrade", "websocket"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="], ["Sec-WebSocket-Version", "13"]]);
    const v = visit(t, { head: upgrade, body: [], end: false }, false);
    const got: Buffer[] = [];
    v.stream.onData = (chunk) => {
      got.push(Buffer.from(chunk));
      v.stream.consumed(chunk.byteLength);
    };
    await within(v.replied, WAIT_MS, "the 101");
    v.stream.write(Buffer.from("ping"));
    await until(() => Buffer.concat(got).toString("latin1").endsWith("ping"), "the echo through the switched connection");
    expect(Buffer.concat(got).toString("latin1")).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    expect(t.pool.h2.of({ host: "127.0.0.1", port: svc.port, upstreamProtocol: "h2c" }).opened).toBe(0);
    v.stream.end();
  });
});

describe("real HTTP/2 services", () => {
  test("nghttpd (nghttp2) without TLS: a file, chunked with its trailer, and an upload echoed", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-nghttpd-"));
    try {
      writeFileSync(join(dir, "page.txt"), "x".repeat(100_000));
      await using nghttpd = await startNghttpd(dir, ["--no-content-length", "--trailer", "x-check: done", "--echo-upload"]);
      const t = h2c(nghttpd.port);
      const page = await fetchThrough(t, { head: requestHead("GET", "/page.txt", [["Host", "files.example"]]) });
      expect(page.status).toBe(200);
      expect(page.text).toContain("transfer-encoding: chunked\r\n");
      expect(dechunk(page.text).body).toBe("x".repeat(100_000));
      expect(page.text).toEndWith("0\r\nx-check: done\r\n\r\n");
      const upload = "y".repeat(300_000);
      const echoed = await fetchThrough(t, { head: requestHead("POST", "/page.txt", [["Host", "files.example"], ["Content-Length", String(upload.length)]]), body: [upload.slice(0, 1000), upload.slice(1000)] });
      expect(echoed.status).toBe(200);
      expect(dechunk(echoed.text).body).toBe(upload);
      const missing = await fetchThrough(t, { head: requestHead("GET", "/nothing-here") });
      expect(missing.status).toBe(404);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

/** A chunked response's body, de-chunked, and its trailer lines. */
function dechunk(text: string): { body: string; trailers: string } {
  let at = text.indexOf("\r\n\r\n") + 4;
  let body = "";
  for (let guard = 0; guard < 100_000; guard++) {
    const nl = text.indexOf("\r\n", at);
    const size = parseInt(text.slice(at, nl), 16);
    if (size === 0) return { body, trailers: text.slice(nl + 2, -2) };
    body += text.slice(nl + 2, nl + 2 + size);
    at = nl + 2 + size + 2;
  }
  throw new Error("too many chunks");
}

