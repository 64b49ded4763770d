/**
 * The agent's h1 streams, end to end on one machine: an edge-side stream
 * of an in-memory mux pair opened with OPEN h1 (a request head as text),
 * the real serveHttpStream on the agent side, and a raw local service on
 * 127.0.0.1 that records every byte it is sent and writes exactly the bytes
 * each test needs. What reaches the service, and what comes back, is
 * compared byte for byte; connections are counted at the service, so reuse
 * (and its absence) is seen, not assumed.
 */
import type { Socket } from "bun";
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { CONTINUE_WAIT_MS } from "../../src/agent/local-http/exchange.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { within } from "../protocol/support.ts";
import { cleanedUp, fetchThrough, pumpOut, requestHead, response, until, visit, WAIT_MS, type ConnState, type TestTunnel } from "./raw-service.ts";

const { service, tunnel } = cleanedUp();

const ok = (body = "ok", extra: [string, string][] = []) => response(200, [["Content-Length", String(body.length)], ...extra], body);
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

describe("the request reaches the service as the edge sent it", () => {
  test("a GET goes byte for byte (names' case and order, nothing added), and the answer comes back byte for byte in REPLY + one DATA with FIN", async () => {
    const answer = "HTTP/1.1 200 Fine Thanks\r\nContent-Length: 5\r\nX-Mixed-Case: One\r\nset-cookie: a=1\r\nSet-Cookie: b=2\r\n\r\nhello";
    const svc = service((_req, socket) => void socket.write(answer));
    const t = tunnel(svc.port);
    const head = requestHead("GET", "/a%20b?q=1&r", [
      ["Host", "visitor.example"],
      ["x-lower", "1"],
      ["X-Forwarded-For", "203.0.113.9"],
      ["Accept-Encoding", "gzip, br"],
      ["cookie", "k=v"],
    ]);
    const res = await fetchThrough(t, { head });
    expect(svc.sent(1).toString("latin1")).toBe(head);
    expect(res.reset).toBeUndefined();
    expect(res.text).toBe(answer);
    const replies = t.pair.toEdge.frames(FrameType.REPLY);
    const data = t.pair.toEdge.frames(FrameType.DATA);
    expect(replies.map((f) => [new TextDecoder().decode(f.payload), f.fin])).toEqual([["{}", false]]);
    expect(data.map((f) => f.fin)).toEqual([true]);
    expect(t.pair.toEdge.frames(FrameType.FIN)).toHaveLength(0);
    expect(t.logs).toEqual([expect.objectContaining({ method: "GET", path: "/a%20b?q=1&r", status: 200 })]);
  });

  test("HTTP/1.0 reaches the service as 1.0, and its connection is not reused", async () => {
    const svc = service((_req, socket) => void socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"));
    const t = tunnel(svc.port);
    const head = requestHead("GET", "/old", [["Host", "h"]], "HTTP/1.0");
    for (let i = 0; i < 2; i++) expect((await fetchThrough(t, { head })).text).toEndWith("\r\n\r\nok");
    expect(svc.requests.map((r) => r.head)).toEqual([head, head]);
    expect(svc.accepted).toBe(2);
    expect(t.pool.idleCount).toBe(0);
  });

  test("a chunked body goes on chunked, sizes, extensions and trailers as the visitor sent them", async () => {
    const svc = service((req, socket) => void socket.write(ok(sha(req.body))));
    const t = tunnel(svc.port);
    const framed = "5;ext=1\r\nhello\r\n1\r\n \r\n00005\r\nworld\r\n0\r\nX-Sum: 10\r\n\r\n";
    const pieces = [framed.slice(0, 3), framed.slice(3, 20), framed.slice(20, 21), framed.slice(21)];
    const head = requestHead("POST", "/up", [["Host", "h"], ["Transfer-Encoding", "chunked"], ["Trailer", "X-Sum"]]);
    const res = await fetchThrough(t, { head, body: pieces });
    expect(res.text).toEndWith(sha(Buffer.from("hello world")));
    expect(svc.requests[0]!.head).toBe(head);
    expect(svc.requests[0]!.framed.toString("latin1")).toBe(framed);
    // the body's end is known, so the connection carries the next request
    await fetchThrough(t);
    expect(svc.accepted).toBe(1);
  });

  test("a Content-Length body goes as is, piece by piece", async () => {
    const svc = service((req, socket) => void socket.write(ok(sha(req.body))));
    const t = tunnel(svc.port);
    const pieces = [Buffer.alloc(10_000, "a"), Buffer.alloc(1, "b"), Buffer.alloc(700_000, "c")];
    const whole = Buffer.concat(pieces);
    const head = requestHead("PUT", "/up", [["Host", "h"], ["Content-Length", String(whole.length)]]);
    const res = await fetchThrough(t, { head, body: pieces });
    expect(res.text).toEndWith(sha(whole));
    expect(svc.sent(1).equals(Buffer.concat([Buffer.from(head, "latin1"), whole]))).toBe(true);
  });

  test("--host-header changes the Host value only (its name's case kept); a request without a Host gets one", async () => {
    const svc = service((_req, socket) => void socket.write(ok()));
    const rewrite = tunnel(svc.port, { target: { hostHeader: "rewrite" } });
    await fetchThrough(rewrite, { head: requestHead("GET", "/", [["X-A", "1"], ["hOsT", "visitor.example"], ["X-B", "2"]]) });
    const named = tunnel(svc.port, { target: { hostHeader: "app.internal" } });
    await fetchThrough(named, { head: requestHead("GET", "/", [["Host", "visitor.example"]]) });
    await fetchThrough(named, { head: requestHead("GET", "/", [["X-A", "1"]], "HTTP/1.0") });
    const plain = tunnel(svc.port);
    await fetchThrough(plain, { head: requestHead("GET", "/", [["X-A", "1"]], "HTTP/1.0") });
    expect(svc.requests.map((r) => r.head)).toEqual([
      `GET / HTTP/1.1\r\nX-A: 1\r\nhOsT: 127.0.0.1:${svc.port}\r\nX-B: 2\r\n\r\n`,
      "GET / HTTP/1.1\r\nHost: app.internal\r\n\r\n",
      "GET / HTTP/1.0\r\nX-A: 1\r\nHost: app.internal\r\n\r\n",
      "GET / HTTP/1.0\r\nX-A: 1\r\n\r\n",
    ]);
  });

  test("a head sent at once and a small body 2 s later: the service has the head first, and the answer follows the body", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.body.toString())));
    const t = tunnel(svc.port);
    const head = requestHead("POST", "/late", [["Host", "h"], ["Content-Length", "4"]]);
    const v = visit(t, { head, body: [], end: false });
    await until(() => svc.sent(1).toString("latin1") === head, "the head at the service");
    await Bun.sleep(2_000);
    expect(svc.requests).toHaveLength(0);
    v.stream.end(Buffer.from("late"));
    const res = await within(v.outcome, WAIT_MS, "the answer");
    expect(res.bytes.toString()).toEndWith("\r\n\r\nlate");
  });

  test("a head the agent cannot read is a reset that says why, and no connection is made", async () => {
    const svc = service((_req, socket) => void socket.write(ok()));
    const t = tunnel(svc.port);
    for (const head of ["GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "GET / HTTP/1.1\r\nHost: a\r\n", "GET / HTTP/1.1\r\nX : y\r\nHost: a\r\n\r\n"]) {
      const res = await fetchThrough(t, { head });
      expect(res.replied).toBe(false);
      expect(res.reset).toStartWith("UPSTREAM_FAILED the request head");
    }
    expect(svc.accepted).toBe(0);
    expect(t.logs.map((l) => String(l.status))).toEqual([expect.stringMatching(/^502 \(/), expect.stringMatching(/^502 \(/), expect.stringMatching(/^502 \(/)]);
  });
});

describe("Expect: 100-continue", () => {
  test("a service that refuses at once is sent no body, and the edge gets its answer as it sent it", async () => {
    const seen: string[] = [];
    const svc = service(() => {}, {
      data: (socket, bytes) => {
        seen.push(bytes.toString("latin1"));
        if (seen.length === 1) socket.write("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n");
        return true;
      },
    });
    const t = tunnel(svc.port);
    const head = requestHead("PUT", "/big", [["Host", "h"], ["Content-Length", "100000"], ["Expect", "100-continue"]]);
    // the visitor does not wait (as curl does after a second): its body is there before any answer
    const v = visit(t, { head, body: [Buffer.alloc(100_000, 1)] });
    const res = await within(v.outcome, WAIT_MS, "the 401");
    expect(res.bytes.toString("latin1")).toBe("HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic\r\nContent-Length: 0\r\n\r\n");
    await svc.closedAtLeast(1, "the agent to close the connection whose body it did not send");
    expect(seen.join("")).toBe(head);
    expect(t.logs.map((l) => l.status)).toEqual([401]);
  });

  test("its 100 Continue goes to the edge, then the body to the service, then the final answer", async () => {
    const svc = service((req, socket) => void socket.write(response(201, [["Content-Length", "7"]], "created")), {
      data: (socket, bytes) => {
        // the head alone: say continue, and let the service read on
        if (bytes.toString("latin1").endsWith("100-continue\r\n\r\n")) socket.write("HTTP/1.1 100 Continue\r\n\r\n");
        return false;
      },
    });
    const t = tunnel(svc.port);
    const head = requestHead("POST", "/form", [["Host", "h"], ["Content-Length", "3"], ["Expect", "100-continue"]]);
    const v = visit(t, { head, body: [], end: false });
    await within(v.replied, WAIT_MS, "the 100 Continue");
    v.stream.end(Buffer.from("abc"));
    const res = await within(v.outcome, WAIT_MS, "the final answer");
    expect(res.bytes.toString("latin1")).toBe(`HTTP/1.1 100 Continue\r\n\r\n${response(201, [["Content-Length", "7"]], "created")}`);
    expect(svc.requests[0]!.body.toString()).toBe("abc");
    expect(t.logs.map((l) => l.status)).toEqual([201]);
  });

  test("a service that ignores the expectation gets the body after CONTINUE_WAIT_MS", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.body.toString())));
    const t = tunnel(svc.port);
    const head = requestHead("POST", "/form", [["Host", "h"], ["Content-Length", "3"], ["Expect", "100-continue"]]);
    const started = performance.now();
    const res = await fetchThrough(t, { head, body: ["abc"] });
    expect(res.text).toEndWith("\r\n\r\nabc");
    expect(performance.now() - started).toBeGreaterThanOrEqual(CONTINUE_WAIT_MS - 50);
  });
});

describe("the response comes back as the service sent it", () => {
  test("a 10 MiB body keeps its Content-Length, and every byte arrives in order", async () => {
    const total = 10 * 1024 * 1024;
    const body = Buffer.alloc(total);
    for (let i = 0; i < total; i += 4) body.writeUInt32LE(i, i);
    const headText = `HTTP/1.1 200 OK\r\nContent-Length: ${total}\r\nContent-Type: application/octet-stream\r\n\r\n`;
    const svc = service((_req, socket) => pumpOut(socket, Buffer.concat([Buffer.from(headText), body])));
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.bytes.subarray(0, headText.length).toString()).toBe(headText);
    expect(sha(res.bytes.subarray(headText.length))).toBe(sha(body));
    expect(res.bytes.length).toBe(headText.length + total);
  });

  test("a chunked response keeps its framing, extensions and trailers, in pieces; the connection carries the next request", async () => {
    const first = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n5;a=b\r\nhello\r\n";
    const second = "6\r\n world\r\n0\r\nX-Sum: 1\r\n\r\n";
    const svc = service((_req, socket) => {
      socket.write(first);
      setTimeout(() => socket.write(second), 20);
    });
    const t = tunnel(svc.port);
    expect((await fetchThrough(t)).text).toBe(first + second);
    expect((await fetchThrough(t)).text).toBe(first + second);
    expect(svc.accepted).toBe(1);
  });

  test("a response without length is read until the service closes, and its connection is not reused", async () => {
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ");
      setTimeout(() => socket.end("part two"), 20);
    });
    const t = tunnel(svc.port);
    for (let i = 0; i < 2; i++) {
      const res = await fetchThrough(t);
      expect(res.reset).toBeUndefined();
      expect(res.text).toBe("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, part two");
    }
    expect(svc.accepted).toBe(2);
  });

  test("HEAD, 204 and 304 answers end with their heads; the connection carries the next request", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/head") socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
      else if (req.path === "/204") socket.write("HTTP/1.1 204 No Content\r\n\r\n");
      else socket.write('HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: 50\r\n\r\n');
    });
    const t = tunnel(svc.port);
    expect((await fetchThrough(t, { head: requestHead("HEAD", "/head") })).text).toBe("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
    expect((await fetchThrough(t, { head: requestHead("GET", "/204") })).status).toBe(204);
    expect((await fetchThrough(t, { head: requestHead("GET", "/304") })).text).toBe('HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: 50\r\n\r\n');
    expect(t.pair.toEdge.frames(FrameType.DATA).map((f) => f.fin)).toEqual([true, true, true]);
    expect(svc.accepted).toBe(1);
  });

  test("a head that comes in pieces goes on whole, in one REPLY + DATA", async () => {
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 O");
      setTimeout(() => socket.write("K\r\nContent-Len"), 20);
      setTimeout(() => socket.write("gth: 2\r\n\r\nok"), 40);
    });
    const t = tunnel(svc.port);
    expect((await fetchThrough(t)).text).toBe("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    expect(t.pair.toEdge.frames(FrameType.DATA)).toHaveLength(1);
  });
});

describe("keep-alive", () => {
  test("sequential requests reuse one connection", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    for (let i = 0; i < 5; i++) expect((await fetchThrough(t, { head: requestHead("GET", `/r${i}`) })).text).toEndWith(`/r${i}`);
    expect(svc.accepted).toBe(1);
    expect(t.pool.opened).toBe(1);
    expect(svc.requests.map((r) => r.conn)).toEqual([1, 1, 1, 1, 1]);
  });

  test("no reuse after a request's or a response's Connection: close, an HTTP/1.0 answer, or bytes past the answer's end", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/close") socket.write(ok("bye", [["Connection", "close"]]));
      else if (req.path === "/http10") socket.write("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
      else if (req.path === "/extra") socket.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA");
      else socket.write(ok());
    });
    const t = tunnel(svc.port);
    const closing = await fetchThrough(t, { head: requestHead("GET", "/asks-close", [["Host", "h"], ["Connection", "close"]]) });
    expect(closing.text).toEndWith("\r\n\r\nok");
    for (const path of ["/close", "/http10"]) expect((await fetchThrough(t, { head: requestHead("GET", path) })).reset).toBeUndefined();
    // the edge gets the answer and nothing past it
    expect((await fetchThrough(t, { head: requestHead("GET", "/extra") })).text).toBe("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    expect(svc.accepted).toBe(4);
    await svc.closedAtLeast(4, "the agent to close each connection");
    expect(t.pool.idleCount).toBe(0);
  });

  test("an idle connection is closed after the pool's idle time, and the next request opens a new one", async () => {
    const svc = service((_req, socket) => void socket.write(ok()));
    const t = tunnel(svc.port, { pool: { idleMs: 200 } });
    await fetchThrough(t);
    expect(t.pool.idleCount).toBe(1);
    await svc.closedAtLeast(1, "the idle connection to be closed");
    await fetchThrough(t);
    expect(svc.accepted).toBe(2);
  });

  test("a pooled connection the service closes as it is reused is retried once on a new one", async () => {
    // the first connection answers once, then drops the next request without a word: the keep-alive race
    const svc = service((req, socket) => {
      if (req.conn === 1 && req.path !== "/first") socket.terminate();
      else socket.write(ok(`${req.path} on ${req.conn}`));
    });
    const t = tunnel(svc.port);
    expect((await fetchThrough(t, { head: requestHead("GET", "/first") })).text).toEndWith("/first on 1");
    const res = await fetchThrough(t, { head: requestHead("GET", "/second") });
    expect(res.reset).toBeUndefined();
    expect(res.text).toEndWith("/second on 2");
    expect(svc.requests.map((r) => `${r.path}@${r.conn}`)).toEqual(["/first@1", "/second@1", "/second@2"]);
    expect(t.logs.map((l) => l.status)).toEqual([200, 200]);
  });

  test("the retry happens once only: a new connection that also fails is a reset before any byte", async () => {
    const svc = service((req, socket) => (req.path === "/first" ? void socket.write(ok()) : socket.terminate()));
    const t = tunnel(svc.port);
    await fetchThrough(t, { head: requestHead("GET", "/first") });
    const res = await fetchThrough(t, { head: requestHead("GET", "/again") });
    expect(res.replied).toBe(false);
    expect(res.reset).toStartWith("UPSTREAM_FAILED ");
    expect(svc.accepted).toBe(2);
    expect(svc.requests.filter((r) => r.path === "/again")).toHaveLength(2);
    expect(String(t.logs[1]!.status)).toStartWith("502 (");
  });

  test("a request whose body already went out is not retried", async () => {
    const svc = service((req, socket) => (req.path === "/first" ? void socket.write(ok()) : socket.terminate()));
    const t = tunnel(svc.port);
    await fetchThrough(t, { head: requestHead("GET", "/first") });
    const res = await fetchThrough(t, { head: requestHead("POST", "/post", [["Host", "h"], ["Content-Length", "4"]]), body: ["data"] });
    expect(res.reset).toStartWith("UPSTREAM_FAILED ");
    expect(svc.accepted).toBe(1);
  });

  test("an answer that comes before the request body is all sent ends the connection; the rest of the body is taken and dropped", async () => {
    // answers as soon as the head is in, without reading the body
    const svc = service(() => {}, {
      data: (socket, bytes) => {
        if (bytes.includes("POST /upload")) socket.write(response(413, [["Content-Length", "8"]], "too much"));
        else if (bytes.includes("GET")) socket.write(ok());
        return true;
      },
    });
    const t = tunnel(svc.port);
    const v = visit(t, { head: requestHead("POST", "/upload", [["Host", "h"], ["Content-Length", "3000000"]]), body: [Buffer.alloc(1000)], end: false });
    const res = await within(v.outcome, WAIT_MS, "the early answer");
    expect(res.reset).toBeUndefined();
    expect(res.bytes.toString()).toBe(response(413, [["Content-Length", "8"]], "too much"));
    // the visitor goes on sending: credit keeps coming back, or this would stall after one window
    for (let i = 0; i < 20; i++) v.stream.write(Buffer.alloc(100_000));
    expect(await within(v.stream.whenDrained(), WAIT_MS, "credit for the dropped body")).toBe(true);
    await svc.closedAtLeast(1, "the agent to close the connection it cannot reuse");
    await fetchThrough(t, { head: requestHead("GET", "/next") });
    expect(svc.accepted).toBe(2);
  });
});

describe("a kept stream: a visitor connection's requests one after another (OPEN keep)", () => {
  /** Opens a kept stream with `head` in OPEN; what comes back is gathered, and whether it ended. */
  function kept(t: TestTunnel, head: string) {
    const stream = t.pair.edge.open({ tunnel: "t1", kind: "h1", remote: "127.0.0.1:50000", head, keep: true }, false);
    const got = { text: "", ended: false, reset: undefined as string | undefined, replies: 0 };
    stream.onReply = () => got.replies++;
    stream.onData = (chunk) => {
      got.text += Buffer.from(chunk).toString("latin1");
      stream.consumed(chunk.byteLength);
    };
    stream.onEnd = () => (got.ended = true);
    stream.whenReset((code) => (got.reset = code));
    const send = (text: string) => stream.write(Buffer.from(text, "latin1"));
    return { stream, got, send };
  }

  test("three requests, the later heads in DATA: each answered in order on one local connection, one REPLY, no FIN until the edge's", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    expect(k.got.ended).toBe(false);
    k.send(requestHead("GET", "/two"));
    await until(() => k.got.text.endsWith("/two"), "the second answer");
    // a head and a body in one piece, then a head cut in two
    k.send(`${requestHead("POST", "/three", [["Host", "h"], ["Content-Length", "4"]])}body`);
    await until(() => k.got.text.endsWith("/three"), "the third answer");
    k.send("GET /fo");
    k.send("ur HTTP/1.1\r\nHost: h\r\n\r\n");
    await until(() => k.got.text.endsWith("/four"), "the fourth answer");
    expect(svc.requests.map((r) => `${r.conn} ${r.path} ${r.body.toString()}`)).toEqual(["1 /one ", "1 /two ", "1 /three body", "1 /four "]);
    expect(k.got.replies).toBe(1);
    expect(k.got.ended).toBe(false);
    expect(t.logs.map((l) => `${l.path} ${l.status}`)).toEqual(["/one 200", "/two 200", "/three 200", "/four 200"]);
    // the visitor's connection is over: the edge's FIN, and the agent's back
    k.stream.end();
    await until(() => k.got.ended, "the agent's FIN");
    expect(k.got.reset).toBeUndefined();
  });

  test("a response that says Connection: close ends the stream with its last byte: the edge opens another for the next request", async () => {
    const svc = service((req, socket) => void socket.write(req.path === "/bye" ? ok("bye", [["Connection", "close"]]) : ok(req.path)));
    const t = tunnel(svc.port);
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    k.send(requestHead("GET", "/bye"));
    await until(() => k.got.ended, "the FIN after the answer that closes");
    expect(k.got.text).toEndWith("Connection: close\r\n\r\nbye");
  });

  test("a request that says Connection: close, and an HTTP/1.0 one, end the stream after their answers", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    const closing = kept(t, requestHead("GET", "/close", [["Host", "h"], ["Connection", "close"]]));
    await until(() => closing.got.ended, "the FIN after a request that asked to close");
    const old = kept(t, requestHead("GET", "/old", [["Host", "h"]], "HTTP/1.0"));
    await until(() => old.got.ended, "the FIN after an HTTP/1.0 request");
    expect(old.got.text).toEndWith("/old");
  });

  test("--host-header applies to every request of a kept stream, the later ones read from DATA too", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port, { target: { hostHeader: "inner.example" } });
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    k.send(requestHead("GET", "/two", [["host", "visitor.example"], ["X-A", "b"]]));
    await until(() => k.got.text.endsWith("/two"), "the second answer");
    expect(svc.requests.map((r) => r.head)).toEqual([requestHead("GET", "/one", [["Host", "inner.example"]]), requestHead("GET", "/two", [["host", "inner.example"], ["X-A", "b"]])]);
  });

  test("a kept stream's quiet spell past the pool's idle time lets go of its local connection; the next request opens another", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port, { pool: { idleMs: 200 } });
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    // the pool's sweep (every idleMs / 4, at least 50 ms) closes it a few hundred ms on: well within WAIT_MS
    await svc.closedAtLeast(1, "the agent to close the held connection");
    k.send(requestHead("GET", "/two"));
    await until(() => k.got.text.endsWith("/two"), "the second answer");
    expect(svc.requests.map((r) => `${r.conn} ${r.path}`)).toEqual(["1 /one", "2 /two"]);
  });

  test("a held connection taken back for a request that outlasts the pool's idle time is not closed under it", async () => {
    // the second answer comes three idle times after its request: the pool's sweeps run meanwhile
    const svc = service((req, socket) => {
      if (req.path === "/slow") setTimeout(() => socket.write(ok("slow")), 600);
      else socket.write(ok(req.path));
    });
    const t = tunnel(svc.port, { pool: { idleMs: 200 } });
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    k.send(requestHead("GET", "/slow"));
    await until(() => k.got.text.endsWith("slow") || k.got.reset !== undefined, "the slow answer");
    expect(k.got.reset).toBeUndefined();
    expect(svc.requests.map((r) => `${r.conn} ${r.path}`)).toEqual(["1 /one", "1 /slow"]);
    expect(svc.closed).toBe(0);
  });

  test("a later head the agent cannot read is a reset that says why", async () => {
    const svc = service((req, socket) => void socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    const k = kept(t, requestHead("GET", "/one"));
    await until(() => k.got.text.endsWith("/one"), "the first answer");
    k.send("GET /two HTTP/1.1\nHost: h\n\n");
    await until(() => k.got.reset !== undefined, "the reset");
    expect(k.got.reset).toStartWith("UPSTREAM_FAILED");
    expect(svc.requests.length).toBe(1);
  });
});
