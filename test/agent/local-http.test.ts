/**
 * The agent's own HTTP/1.1 client, end to end on one machine: an edge-side
 * stream in an in-memory mux pair, the real serveHttpStream on the agent
 * side, and a raw local service on 127.0.0.1 that writes exactly the bytes
 * each test needs. Connections are counted at the service, so reuse (and
 * its absence) is seen, not assumed.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import net from "node:net";
import { FrameType, WireError } from "../../src/protocol/wire.ts";
import { within } from "../protocol/support.ts";
import { fetchThrough, RawService, response, tunnelTo, visit, WAIT_MS, type TestTunnel } from "./raw-service.ts";

const services: RawService[] = [];
const tunnels: TestTunnel[] = [];

function service(...args: ConstructorParameters<typeof RawService>): RawService {
  const s = new RawService(...args);
  services.push(s);
  return s;
}

function tunnel(...args: Parameters<typeof tunnelTo>): TestTunnel {
  const t = tunnelTo(...args);
  tunnels.push(t);
  return t;
}

afterEach(() => {
  for (const t of tunnels.splice(0)) {
    t.pair.edge.close();
    t.pair.agent.close();
    t.pool.close();
  }
  for (const s of services.splice(0)) s.stop();
});

const ok = (body = "ok", extra: [string, string][] = []) => response(200, [["Content-Length", String(body.length)], ...extra], body);

describe("requests and responses", () => {
  test("a GET goes out as the visitor sent it, and the response comes back whole in REPLY + one DATA with FIN", async () => {
    const svc = service((_req, socket) => {
      socket.write(
        response(
          200,
          [
            ["Content-Length", "5"],
            ["Set-Cookie", "a=1; Path=/"],
            ["Set-Cookie", "b=2, c=3"],
            ["X-Multi", "one"],
            ["X-Multi", "two"],
            ["Connection", "keep-alive, X-Private"],
            ["Keep-Alive", "timeout=5"],
            ["X-Private", "hop"],
          ],
          "hello",
        ),
      );
    });
    const t = tunnel(svc.port);
    const res = await fetchThrough(t, { path: "/a%20b?q=1&r", headers: [["host", "visitor.example"], ["x-test", "1"], ["cookie", "k=v"]] });
    expect(res.reset).toBeUndefined();
    expect(res.head?.status).toBe(200);
    expect(res.body.toString()).toBe("hello");
    expect(res.head?.headers).toEqual([
      ["content-length", "5"],
      ["set-cookie", "a=1; Path=/"],
      ["set-cookie", "b=2, c=3"],
      ["x-multi", "one"],
      ["x-multi", "two"],
    ]);
    // nothing added: no Accept-Encoding, no User-Agent, no Connection
    expect(svc.requests[0]!.head).toBe("GET /a%20b?q=1&r HTTP/1.1\r\nhost: visitor.example\r\nx-test: 1\r\ncookie: k=v\r\n\r\n");
    const replies = t.pair.toEdge.frames(FrameType.REPLY);
    const data = t.pair.toEdge.frames(FrameType.DATA);
    expect(replies).toHaveLength(1);
    expect(replies[0]!.fin).toBe(false);
    expect(data).toHaveLength(1);
    expect(data[0]!.fin).toBe(true);
    expect(t.pair.toEdge.frames(FrameType.FIN)).toHaveLength(0);
    expect(t.logs).toHaveLength(1);
    expect(t.logs[0]).toMatchObject({ method: "GET", path: "/a%20b?q=1&r", status: 200 });
  });

  test("--host-header rewrite sends the local address, a name sends that name, and a missing Host gets the local address", async () => {
    const svc = service((_req, socket) => socket.write(ok()));
    const rewrite = tunnel(svc.port, { hostHeader: "rewrite" });
    await fetchThrough(rewrite, { headers: [["host", "visitor.example"]] });
    const named = tunnel(svc.port, { hostHeader: "app.internal" });
    await fetchThrough(named, { headers: [["host", "visitor.example"]] });
    const plain = tunnel(svc.port);
    await fetchThrough(plain, { headers: [["x-no-host", "1"]] });
    const hosts = svc.requests.map((r) => r.headers.filter(([n]) => n === "host").map(([, v]) => v));
    expect(hosts).toEqual([[`127.0.0.1:${svc.port}`], ["app.internal"], [`127.0.0.1:${svc.port}`]]);
  });

  test("a body of unknown length goes chunked, piece by piece; one with a Content-Length goes as is", async () => {
    const svc = service((req, socket) => socket.write(ok(createHash("sha256").update(req.body).digest("hex"))));
    const t = tunnel(svc.port);
    const pieces = [Buffer.alloc(10_000, "a"), Buffer.alloc(1, "b"), Buffer.alloc(70_000, "c")];
    const whole = Buffer.concat(pieces);
    const chunked = await fetchThrough(t, { method: "POST", path: "/up", body: pieces });
    expect(chunked.body.toString()).toBe(createHash("sha256").update(whole).digest("hex"));
    const first = svc.requests[0]!;
    expect(first.headers).toContainEqual(["transfer-encoding", "chunked"]);
    expect(first.headers.some(([n]) => n === "content-length")).toBe(false);

    const sized = await fetchThrough(t, { method: "PUT", path: "/up", headers: [["host", "h"], ["content-length", String(whole.length)]], body: pieces });
    expect(sized.body.toString()).toBe(createHash("sha256").update(whole).digest("hex"));
    const second = svc.requests[1]!;
    expect(second.headers).toContainEqual(["content-length", String(whole.length)]);
    expect(second.headers.some(([n]) => n === "transfer-encoding")).toBe(false);
    expect(svc.accepted).toBe(1);
  });

  test("a chunked response with extensions and trailers streams through; hop-by-hop fields stay behind", async () => {
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: x-sum\r\n\r\n5;a=b\r\nhello\r\n");
      setTimeout(() => socket.write("6\r\n world\r\n0\r\nx-sum: 1\r\n\r\n"), 20);
    });
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.body.toString()).toBe("hello world");
    expect(res.head?.headers).toEqual([]);
    expect(await fetchThrough(t).then((r) => r.body.toString())).toBe("hello world");
    expect(svc.accepted).toBe(1);
  });

  test("a response without length or chunking is read until the service closes, and its connection is not reused", async () => {
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\npart one, ");
      setTimeout(() => socket.end("part two"), 20);
    });
    const t = tunnel(svc.port);
    for (let i = 0; i < 2; i++) {
      const res = await fetchThrough(t);
      expect(res.reset).toBeUndefined();
      expect(res.body.toString()).toBe("part one, part two");
      expect(res.head?.headers).toEqual([["content-type", "text/plain"]]);
    }
    expect(svc.accepted).toBe(2);
  });

  test("a response bigger than one DATA frame streams with its Content-Length", async () => {
    const big = Buffer.alloc(300_000, "z");
    const svc = service((_req, socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${big.length}\r\n\r\n`);
      socket.write(big);
    });
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.head?.headers).toEqual([["content-length", String(big.length)]]);
    expect(res.body.equals(big)).toBe(true);
  });

  test("HEAD, 204 and 304 answers have no body; the connection carries the next request", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/head") socket.write("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
      else if (req.path === "/204") socket.write("HTTP/1.1 204 No Content\r\n\r\n");
      else socket.write('HTTP/1.1 304 Not Modified\r\nETag: "v1"\r\nContent-Length: 50\r\n\r\n');
    });
    const t = tunnel(svc.port);
    const head = await fetchThrough(t, { method: "HEAD", path: "/head" });
    expect(head.head?.status).toBe(200);
    expect(head.head?.headers).toEqual([["content-length", "100"]]);
    expect(head.body.length).toBe(0);
    expect((await fetchThrough(t, { path: "/204" })).head?.status).toBe(204);
    const notModified = await fetchThrough(t, { path: "/304" });
    expect(notModified.head?.status).toBe(304);
    expect(notModified.body.length).toBe(0);
    // each answer was one REPLY carrying the FIN
    const replies = t.pair.toEdge.frames(FrameType.REPLY);
    expect(replies.map((f) => f.fin)).toEqual([true, true, true]);
    expect(t.pair.toEdge.frames(FrameType.DATA)).toHaveLength(0);
    expect(svc.accepted).toBe(1);
  });

  test("100 Continue is skipped and the final answer is the one forwarded and logged", async () => {
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 100 Continue\r\n\r\n");
      setTimeout(() => socket.write(response(201, [["Content-Length", "7"]], "created")), 10);
    });
    const t = tunnel(svc.port);
    const res = await fetchThrough(t, { method: "POST", headers: [["host", "h"], ["expect", "100-continue"], ["content-length", "3"]], body: [Buffer.from("abc")] });
    expect(res.head?.status).toBe(201);
    expect(res.body.toString()).toBe("created");
    expect(t.pair.toEdge.frames(FrameType.REPLY)).toHaveLength(1);
    expect(t.logs.map((l) => l.status)).toEqual([201]);
  });
});

describe("keep-alive", () => {
  test("sequential requests reuse one connection", async () => {
    const svc = service((req, socket) => socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    for (let i = 0; i < 5; i++) expect((await fetchThrough(t, { path: `/r${i}` })).body.toString()).toBe(`/r${i}`);
    expect(svc.accepted).toBe(1);
    expect(t.pool.opened).toBe(1);
    expect(svc.requests.map((r) => r.conn)).toEqual([1, 1, 1, 1, 1]);
  });

  test("a request without a body goes without a Content-Length its head still lists (but keeps a 0), and the next request on the connection is read as itself", async () => {
    const svc = service((req, socket) => socket.write(ok(req.path)));
    const t = tunnel(svc.port);
    // what an edge without the same guard would send: a GET's head with a length, and no body
    const get = await fetchThrough(t, { path: "/get", headers: [["host", "h"], ["content-length", "3"]] });
    expect(get.body.toString()).toBe("/get");
    const post = await fetchThrough(t, { method: "POST", path: "/post", headers: [["host", "h"], ["content-length", "0"]] });
    expect(post.body.toString()).toBe("/post");
    expect((await fetchThrough(t, { path: "/after" })).body.toString()).toBe("/after");
    expect(svc.requests.map((r) => r.head)).toEqual([
      "GET /get HTTP/1.1\r\nhost: h\r\n\r\n",
      "POST /post HTTP/1.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n",
      "GET /after HTTP/1.1\r\nhost: visitor.example\r\n\r\n",
    ]);
    expect(svc.accepted).toBe(1);
  });

  test("Connection: close and HTTP/1.0 without keep-alive are not reused", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/close") socket.write(ok("bye", [["Connection", "close"]]));
      else socket.write("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
    });
    const t = tunnel(svc.port);
    for (const path of ["/close", "/close", "/http10", "/http10"]) expect((await fetchThrough(t, { path })).reset).toBeUndefined();
    expect(svc.accepted).toBe(4);
    await svc.closedAtLeast(4, "the agent to close each connection");
    expect(t.pool.idleCount).toBe(0);
  });

  test("an idle connection is closed after the pool's idle time, and the next request opens a new one", async () => {
    const svc = service((_req, socket) => socket.write(ok()));
    const t = tunnel(svc.port, {}, { idleMs: 200 });
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
    expect((await fetchThrough(t, { path: "/first" })).body.toString()).toBe("/first on 1");
    const res = await fetchThrough(t, { path: "/second" });
    expect(res.reset).toBeUndefined();
    expect(res.body.toString()).toBe("/second on 2");
    expect(svc.requests.map((r) => `${r.path}@${r.conn}`)).toEqual(["/first@1", "/second@1", "/second@2"]);
    expect(t.logs.map((l) => l.status)).toEqual([200, 200]);
  });

  test("the retry happens once only: a new connection that also fails is a 502", async () => {
    const svc = service((req, socket) => (req.path === "/first" ? socket.write(ok()) : socket.terminate()));
    const t = tunnel(svc.port);
    await fetchThrough(t, { path: "/first" });
    const res = await fetchThrough(t, { path: "/again" });
    expect(res.reset).toStartWith(WireError.UPSTREAM_FAILED);
    expect(svc.accepted).toBe(2);
    expect(svc.requests.filter((r) => r.path === "/again")).toHaveLength(2);
    expect(String(t.logs[1]!.status)).toStartWith("502 (");
  });

  test("a request whose body already went out is not retried", async () => {
    const svc = service((req, socket) => (req.path === "/first" ? socket.write(ok()) : socket.terminate()));
    const t = tunnel(svc.port);
    await fetchThrough(t, { path: "/first" });
    const res = await fetchThrough(t, { method: "POST", path: "/post", headers: [["host", "h"], ["content-length", "4"]], body: [Buffer.from("data")] });
    expect(res.reset).toStartWith(WireError.UPSTREAM_FAILED);
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
    const v = visit(t, { method: "POST", path: "/upload", headers: [["host", "h"], ["content-length", "3000000"]], body: [Buffer.alloc(1000)], end: false });
    const res = await within(v.outcome, WAIT_MS, "the early answer");
    expect(res.reset).toBeUndefined();
    expect((await v.reply).status).toBe(413);
    expect(res.body.toString()).toBe("too much");
    // the visitor goes on sending: credit keeps coming back, or this would stall after one window
    for (let i = 0; i < 20; i++) v.stream.write(Buffer.alloc(100_000));
    expect(await within(v.stream.whenDrained(), WAIT_MS, "credit for the dropped body")).toBe(true);
    await svc.closedAtLeast(1, "the agent to close the connection it cannot reuse");
    await fetchThrough(t, { path: "/next" });
    expect(svc.accepted).toBe(2);
  });
});

describe("failures", () => {
  test("a refused connection is a 502 with 'connection refused', logged as today", async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const t = tunnel(port);
    const res = await fetchThrough(t, { path: "/refused" });
    expect(res.reset).toBe(`${WireError.UPSTREAM_FAILED} connection refused`);
    expect(t.logs[0]).toMatchObject({ method: "GET", path: "/refused", status: "502 (connection refused)" });
  });

  test("a response head over the limit is refused with a reason", async () => {
    const svc = service((_req, socket) => socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(70_000)}\r\n\r\n`));
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.reset).toBe(`${WireError.UPSTREAM_FAILED} response head larger than 64 KiB`);
    expect(t.logs[0]!.status).toBe("502 (response head larger than 64 KiB)");
    await svc.closedAtLeast(1, "the agent to drop the connection");
  });

  test("a malformed status line is a 502 with the reason", async () => {
    const svc = service((_req, socket) => socket.write("hello there\r\n\r\n"));
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.reset).toStartWith(`${WireError.UPSTREAM_FAILED} malformed status line`);
  });

  test("a bad chunk size after the head resets the stream, and the connection is not reused", async () => {
    const svc = service((_req, socket) => socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n"));
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.head?.status).toBe(200);
    expect(res.reset).toBe(`${WireError.UPSTREAM_FAILED} malformed chunk size`);
    await svc.closedAtLeast(1, "the agent to drop the connection");
    expect(t.pool.idleCount).toBe(0);
  });

  for (const size of [10_000, 2_000_000]) {
    test(`a service that resets mid-body (${size} bytes announced) resets the stream`, async () => {
      const svc = service((_req, socket) => {
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\n`);
        socket.write(Buffer.alloc(1000, "x"));
        setTimeout(() => socket.terminate(), 20);
      });
      const t = tunnel(svc.port);
      const res = await fetchThrough(t);
      expect(res.reset).toStartWith(WireError.UPSTREAM_FAILED);
      expect(res.body.length).toBeLessThan(size);
      expect(t.pool.idleCount).toBe(0);
    });
  }

  test("a visitor who leaves mid-response makes the agent drop its connection, which is never pooled", async () => {
    let sent = 0;
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
      sent++;
    });
    const t = tunnel(svc.port);
    const v = visit(t);
    await within(v.reply, WAIT_MS, "the response head");
    v.stream.reset();
    await svc.closedAtLeast(1, "the agent to close its local connection");
    expect(sent).toBe(1);
    expect(t.pool.idleCount).toBe(0);
    expect((await within(v.outcome, WAIT_MS, "the reset")).reset).toBe(WireError.CANCELLED);
  });
});

describe("backpressure", () => {
  test("a visitor that does not read stops the agent reading the service; every byte arrives once it reads", async () => {
    const total = 48 * 1024 * 1024;
    const block = Buffer.alloc(1024 * 1024, 7);
    let written = 0;
    const svc = service((_req, socket) => {
      socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${total}\r\n\r\n`);
      socket.data.pump = () => {
        while (written < total) {
          const piece = block.subarray(written % block.length, Math.min(block.length, total - written + (written % block.length)));
          const n = socket.write(piece);
          written += Math.max(n, 0);
          if (n < piece.length) return; // the socket is full: drain calls again
        }
      };
      socket.data.pump();
    });
    const t = tunnel(svc.port);
    const v = visit(t, {}, false);
    await within(v.reply, WAIT_MS, "the response head");
    await Bun.sleep(500);
    // what the agent holds for the stream: without the pause it would be most of what the service wrote
    const held = t.pair.agent.streams.get(v.stream.id)!.pendingBytes;
    expect(held).toBeLessThan(2 * 1024 * 1024);
    expect(written).toBeLessThan(total);
    let got = 0;
    let wrong = 0;
    const done = new Promise<void>((resolve) => {
      v.stream.onData = (chunk) => {
        got += chunk.byteLength;
        for (let i = 0; i < chunk.byteLength; i += 4096) if (chunk[i] !== 7) wrong++;
        v.stream.consumed(chunk.byteLength);
      };
      v.stream.onEnd = () => resolve();
    });
    await within(done, 20_000, "the whole body");
    expect(got).toBe(total);
    expect(wrong).toBe(0);
  });

  test("a service that does not read holds the visitor's body back through credit", async () => {
    let reading = false;
    let received = 0;
    const svc = service(() => {}, {
      data: (socket, bytes) => {
        received += bytes.byteLength;
        if (!reading) socket.pause();
        return true;
      },
    });
    const t = tunnel(svc.port);
    const total = 48 * 1024 * 1024;
    const v = visit(t, { method: "POST", path: "/sink", headers: [["host", "h"], ["content-length", String(total)]], body: [], end: false });
    const block = Buffer.alloc(256 * 1024, 3);
    let offered = 0;
    const writer = (async () => {
      while (offered < total) {
        offered += block.length;
        if (!v.stream.write(block) && !(await v.stream.whenDrained())) throw new Error("the stream ended while writing");
      }
      v.stream.end();
    })();
    await Bun.sleep(500);
    // a window in flight, plus what the loopback buffers hold: nowhere near the whole body
    expect(offered).toBeLessThan(total / 2);
    reading = true;
    for (const socket of svc.sockets) socket.resume();
    await within(writer, 20_000, "the whole body to be taken");
    for (let i = 0; i < 400 && received < total; i++) await Bun.sleep(50);
    expect(received).toBeGreaterThan(total); // the body and the head before it
  });
});
