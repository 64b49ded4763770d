/**
 * The agent's h1 streams when things go wrong, and under pressure: a
 * service that cannot be reached, answers nonsense or goes away (a reset
 * before any byte, which the edge turns into its 502 page, or a reset mid
 * response), a visitor who leaves, and credit holding each side back when
 * the other is slow. Same rig as local-http.test.ts.
 */
import { describe, expect, test } from "bun:test";
import net from "node:net";
import { WireError } from "../../src/protocol/wire.ts";
import { within } from "../protocol/support.ts";
import { cleanedUp, fetchThrough, offerInto, requestHead, visit, WAIT_MS } from "./raw-service.ts";

const { service, tunnel } = cleanedUp();

describe("failures", () => {
  test("a refused connection is a reset before any byte, 'connection refused', logged as a 502", async () => {
    const probe = net.createServer();
    await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
    const port = (probe.address() as net.AddressInfo).port;
    await new Promise<void>((r) => probe.close(() => r()));
    const t = tunnel(port);
    const res = await fetchThrough(t, { head: requestHead("GET", "/refused") });
    expect(res).toMatchObject({ replied: false, reset: `${WireError.UPSTREAM_FAILED} connection refused` });
    expect(t.logs[0]).toMatchObject({ method: "GET", path: "/refused", status: "502 (connection refused)" });
  });

  test("a service that closes without answering is a reset before any byte", async () => {
    const svc = service((_req, socket) => void socket.end());
    const t = tunnel(svc.port);
    const res = await fetchThrough(t);
    expect(res.replied).toBe(false);
    expect(res.bytes.length).toBe(0);
    expect(res.reset).toBe(`${WireError.UPSTREAM_FAILED} the local service closed the connection without answering`);
  });

  test("a response head over the limit, or a malformed one, is a reset before any byte that says why", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/big") socket.write(`HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(70_000)}\r\n\r\n`);
      else socket.write("hello there\r\n\r\n");
    });
    const t = tunnel(svc.port);
    const big = await fetchThrough(t, { head: requestHead("GET", "/big") });
    expect(big).toMatchObject({ replied: false, reset: `${WireError.UPSTREAM_FAILED} response head larger than 64 KiB` });
    expect(t.logs[0]!.status).toBe("502 (response head larger than 64 KiB)");
    const garbled = await fetchThrough(t, { head: requestHead("GET", "/garbled") });
    expect(garbled.replied).toBe(false);
    expect(garbled.reset).toStartWith(`${WireError.UPSTREAM_FAILED} malformed status line`);
    await svc.closedAtLeast(2, "the agent to drop both connections");
  });

  test("a bad chunk size resets the stream: before any byte when it came in the head's read, mid-response after; the connection is not reused", async () => {
    const svc = service((req, socket) => {
      if (req.path === "/at-once") return void socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\nzz\r\n");
      socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
      setTimeout(() => socket.write("zz\r\n"), 20);
    });
    const t = tunnel(svc.port);
    const atOnce = await fetchThrough(t, { head: requestHead("GET", "/at-once") });
    expect(atOnce).toMatchObject({ replied: false, reset: `${WireError.UPSTREAM_FAILED} malformed chunk size` });
    const later = await fetchThrough(t, { head: requestHead("GET", "/later") });
    expect(later).toMatchObject({ replied: true, reset: `${WireError.UPSTREAM_FAILED} malformed chunk size` });
    expect(later.text).toEndWith("5\r\nhello\r\n");
    // a 502 for the first (nothing went on), a 200 for the second (its head did)
    expect(t.logs.map((l) => l.status)).toEqual(["502 (malformed chunk size)", 200]);
    await svc.closedAtLeast(2, "the agent to drop both connections");
    expect(t.pool.idleCount).toBe(0);
  });

  for (const size of [10_000, 2_000_000]) {
    test(`a service that goes away mid-body (${size} bytes announced) resets the stream after the bytes that came`, async () => {
      const svc = service((_req, socket) => {
        socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\n`);
        socket.write(Buffer.alloc(1000, "x"));
        setTimeout(() => socket.terminate(), 20);
      });
      const t = tunnel(svc.port);
      const res = await fetchThrough(t);
      expect(res.replied).toBe(true);
      expect(res.text).toStartWith(`HTTP/1.1 200 OK\r\nContent-Length: ${size}\r\n\r\nxxx`);
      expect(res.reset).toStartWith(WireError.UPSTREAM_FAILED);
      expect(res.bytes.length).toBeLessThan(size);
      expect(t.pool.idleCount).toBe(0);
    });
  }

  test("a request that runs past its body, or ends before it, is reset and its connection dropped", async () => {
    const svc = service(() => {});
    const t = tunnel(svc.port);
    const over = await fetchThrough(t, { head: requestHead("POST", "/over", [["Host", "h"], ["Content-Length", "2"]]), body: ["abcd"] });
    expect(over.reset).toBe(`${WireError.UPSTREAM_FAILED} the request went on past its end`);
    const short = await fetchThrough(t, { head: requestHead("POST", "/short", [["Host", "h"], ["Content-Length", "5"]]), body: ["ab"] });
    expect(short.reset).toBe(`${WireError.UPSTREAM_FAILED} the request ended before its body did`);
    await svc.closedAtLeast(2, "the agent to drop both connections");
  });

  test("a visitor who leaves mid-response makes the agent drop its connection, which is never pooled", async () => {
    let sent = 0;
    const svc = service((_req, socket) => {
      socket.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n");
      sent++;
    });
    const t = tunnel(svc.port);
    const v = visit(t);
    await within(v.replied, WAIT_MS, "the response head");
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
        for (let guard = 0; guard < 100_000 && written < total; guard++) {
          const piece = block.subarray(0, Math.min(block.length, total - written));
          const n = socket.write(piece);
          written += Math.max(n, 0);
          if (n < piece.length) return; // the socket is full: drain calls again
        }
      };
      socket.data.pump();
    });
    const t = tunnel(svc.port);
    const v = visit(t, {}, false);
    await within(v.replied, WAIT_MS, "the response head");
    await Bun.sleep(500);
    // what the agent holds for the stream: without the pause it would be most of what the service wrote
    const held = t.pair.agent.streams.get(v.stream.id)!.pendingBytes;
    expect(held).toBeLessThan(2 * 1024 * 1024);
    expect(written).toBeLessThan(total);
    let got = 0;
    let wrong = 0;
    const done = new Promise<void>((resolve) => {
      v.stream.onData = (chunk) => {
        for (let i = got === 0 ? 64 : 0; i < chunk.byteLength; i += 4096) if (chunk[i] !== 7) wrong++;
        got += chunk.byteLength;
        v.stream.consumed(chunk.byteLength);
      };
      v.stream.onEnd = () => resolve();
    });
    await within(done, 20_000, "the whole body");
    expect(got).toBe(total + `HTTP/1.1 200 OK\r\nContent-Length: ${total}\r\n\r\n`.length);
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
    const v = visit(t, { head: requestHead("POST", "/sink", [["Host", "h"], ["Content-Length", String(total)]]), body: [], end: false });
    const block = Buffer.alloc(256 * 1024, 3);
    const writer = offerInto(v.stream, total, block);
    await Bun.sleep(500);
    // a window in flight, plus what the loopback buffers hold: nowhere near the whole body
    expect(writer.offered()).toBeLessThan(total / 2);
    reading = true;
    for (const socket of svc.sockets) socket.resume();
    await within(writer.done, 20_000, "the whole body to be taken");
    for (let i = 0; i < 400 && received < total; i++) await Bun.sleep(50);
    expect(received).toBeGreaterThan(total); // the body and the head before it
  });
});
