/**
 * After `101 Switching Protocols` the agent pipes the local connection and
 * the h1 stream to each other, bytes as they come, until each side's FIN:
 * megabytes both ways arrive intact, each direction ends on its own, a
 * failure on either side ends both, and a slow reader on either side holds
 * the other back. Same rig as local-http.test.ts, with a raw service that
 * keeps its connections half-open.
 */
import type { Socket } from "bun";
import { expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { WireError } from "../../src/protocol/wire.ts";
import { within } from "../protocol/support.ts";
import { cleanedUp, offerInto, pumpOut, requestHead, until, visit, WAIT_MS, type ConnState, type RawService, type TestTunnel } from "./raw-service.ts";

const { service, tunnel } = cleanedUp();

const UPGRADE = requestHead("GET", "/ws", [["Host", "h"], ["Connection", "Upgrade"], ["Upgrade", "websocket"], ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="], ["Sec-WebSocket-Version", "13"]]);
const SWITCHED = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** Pseudo-random bytes, the same for the same seed. */
function pattern(n: number, seed: number): Buffer {
  const out = Buffer.alloc(n);
  let x = seed;
  for (let i = 0; i < n; i += 4) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    out.writeUInt32LE(x, i);
  }
  return out;
}

interface Switching {
  svc: RawService;
  t: TestTunnel;
  /** What each connection was sent after the upgrade request's head. */
  after: Map<number, Buffer[]>;
  /** The agent's FIN reached the service on this connection. */
  ended: Set<number>;
}

/**
 * A service that answers the upgrade with 101 (and `then(socket)` after it),
 * records what comes after the head, and is told of the agent's FIN.
 */
function switching(then: (socket: Socket<ConnState>, ended: () => boolean) => void, onEnd?: (socket: Socket<ConnState>) => void, window?: number): Switching {
  const after = new Map<number, Buffer[]>();
  const ended = new Set<number>();
  const svc = service(() => {}, {
    allowHalfOpen: true,
    data: (socket, bytes) => {
      const conn = socket.data.index;
      if (!after.has(conn)) {
        const text = bytes.toString("latin1");
        const end = text.indexOf("\r\n\r\n");
        after.set(conn, [Buffer.from(bytes.subarray(end + 4))]);
        then(socket, () => ended.has(conn));
      } else {
        after.get(conn)!.push(Buffer.from(bytes));
      }
      return true;
    },
    end: (socket) => {
      ended.add(socket.data.index);
      onEnd?.(socket);
    },
  });
  const t = tunnel(svc.port, { window });
  return { svc, t, after, ended };
}

test("101, then 5 MiB each way at once: every byte arrives intact, and each direction ends on its own", async () => {
  const size = 5 * 1024 * 1024;
  const down = pattern(size, 1);
  const up = pattern(size, 2);
  let sentAll = false;
  const { svc, t, after, ended } = switching(
    (socket, visitorEnded) =>
      // the 101 head and the first of the new protocol's bytes in one write
      pumpOut(socket, Buffer.concat([Buffer.from(SWITCHED), down]), () => {
        sentAll = true;
        if (visitorEnded()) socket.end();
      }),
    (socket) => sentAll && socket.end(),
  );
  const v = visit(t, { head: UPGRADE, body: [], end: false });
  await within(v.replied, WAIT_MS, "the 101");
  for (let at = 0; at < size; at += 100_000) {
    if (!v.stream.write(up.subarray(at, Math.min(size, at + 100_000))) && !(await v.stream.whenDrained())) throw new Error("the stream ended while writing");
  }
  v.stream.end();
  const res = await within(v.outcome, 20_000, "the service's bytes and its FIN");
  expect(res.reset).toBeUndefined();
  expect(res.bytes.subarray(0, SWITCHED.length).toString("latin1")).toBe(SWITCHED);
  expect(res.bytes.length).toBe(SWITCHED.length + size);
  expect(sha(res.bytes.subarray(SWITCHED.length))).toBe(sha(down));
  await until(() => ended.has(1), "the visitor's FIN at the service");
  const got = Buffer.concat(after.get(1)!);
  expect(got.length).toBe(size);
  expect(sha(got)).toBe(sha(up));
  await svc.closedAtLeast(1, "the connection to close");
  await until(() => t.switchedClosed.length === 1, "the switched connection's end");
  expect(t.switchedClosed).toEqual(["/ws"]);
  expect(t.logs).toEqual([expect.objectContaining({ method: "GET", path: "/ws", status: "101 websocket", kind: "ws" })]);
  expect(t.pool.idleCount).toBe(0);
});

test("the service ends first: what the visitor sends after that still reaches it, and the visitor's FIN closes the connection", async () => {
  const { svc, t, after } = switching(
    (socket) => {
      socket.write(`${SWITCHED}bye`);
      socket.shutdown();
    },
    (socket) => socket.end(),
  );
  const v = visit(t, { head: UPGRADE, body: [], end: false });
  const serviceEnded = Promise.withResolvers<void>();
  const chunks: Buffer[] = [];
  v.stream.onData = (chunk) => {
    chunks.push(Buffer.from(chunk));
    v.stream.consumed(chunk.byteLength);
  };
  v.stream.onEnd = () => serviceEnded.resolve();
  await within(serviceEnded.promise, WAIT_MS, "the service's FIN");
  expect(Buffer.concat(chunks).toString("latin1")).toBe(`${SWITCHED}bye`);
  v.stream.end(Buffer.from("late words"));
  await svc.closedAtLeast(1, "the connection to close");
  expect(Buffer.concat(after.get(1)!).toString()).toBe("late words");
  await until(() => t.switchedClosed.length === 1, "the switched connection's end");
});

test("bytes the visitor sends right behind its upgrade request reach the service after the head", async () => {
  const { t, after } = switching((socket) => void socket.write(SWITCHED));
  const v = visit(t, { head: UPGRADE, body: ["early"], end: false });
  await within(v.replied, WAIT_MS, "the 101");
  await until(() => Buffer.concat(after.get(1) ?? []).toString() === "early", "the early bytes at the service");
});

test("a service that drops the switched connection resets the stream; a visitor who leaves drops the connection", async () => {
  const dropping = switching((socket) => {
    socket.write(`${SWITCHED}partial`);
    setTimeout(() => socket.terminate(), 20);
  });
  const v = visit(dropping.t, { head: UPGRADE, body: [], end: false });
  const res = await within(v.outcome, WAIT_MS, "the reset");
  expect(res.bytes.toString("latin1")).toBe(`${SWITCHED}partial`);
  expect(res.reset).toStartWith(WireError.UPSTREAM_FAILED);
  await until(() => dropping.t.switchedClosed.length === 1, "the switched connection's end");

  const left = switching((socket) => void socket.write(SWITCHED));
  const w = visit(left.t, { head: UPGRADE, body: [], end: false });
  await within(w.replied, WAIT_MS, "the 101");
  w.stream.reset();
  await left.svc.closedAtLeast(1, "the agent to drop the connection");
  await until(() => left.t.switchedClosed.length === 1, "the switched connection's end");
});

test("a visitor that does not read stops the agent reading the switched connection; every byte arrives once it reads", async () => {
  const total = 32 * 1024 * 1024;
  const down = pattern(total, 3);
  let sentAll = false;
  const { t } = switching((socket) => pumpOut(socket, Buffer.concat([Buffer.from(SWITCHED), down]), () => ((sentAll = true), socket.end())));
  const v = visit(t, { head: UPGRADE, body: [], end: false }, false);
  await within(v.replied, WAIT_MS, "the 101");
  await Bun.sleep(500);
  const held = t.pair.agent.streams.get(v.stream.id)!.pendingBytes;
  expect(held).toBeLessThan(2 * 1024 * 1024);
  expect(sentAll).toBe(false);
  const chunks: Buffer[] = [];
  const done = new Promise<void>((resolve) => {
    v.stream.onData = (chunk) => {
      chunks.push(Buffer.from(chunk));
      v.stream.consumed(chunk.byteLength);
    };
    v.stream.onEnd = () => resolve();
  });
  v.stream.end();
  await within(done, 20_000, "every byte");
  const got = Buffer.concat(chunks);
  expect(got.length).toBe(SWITCHED.length + total);
  expect(sha(got.subarray(SWITCHED.length))).toBe(sha(down));
});

test("a service that does not read holds the visitor back through credit after the switch", async () => {
  const { svc, t } = switching(
    (socket) => {
      socket.write(SWITCHED);
      socket.pause();
    },
    (socket) => socket.end(),
  );
  const v = visit(t, { head: UPGRADE, body: [], end: false });
  await within(v.replied, WAIT_MS, "the 101");
  const total = 48 * 1024 * 1024;
  const block = Buffer.alloc(256 * 1024, 5);
  const writer = offerInto(v.stream, total, block);
  await Bun.sleep(500);
  // a window in flight, plus what the loopback buffers hold: nowhere near all of it
  expect(writer.offered()).toBeLessThan(total / 2);
  for (const socket of svc.sockets) socket.resume();
  await within(writer.done, 20_000, "every byte to be taken");
  await svc.closedAtLeast(1, "the connection to close after the visitor's FIN");
  expect(svc.received.get(1)).toBe(UPGRADE.length + total);
});
