/**
 * SocketSender against a scripted socket: what the kernel does not take is
 * kept (as a copy: the mux reuses its buffer) and written first, in order;
 * the mux hears "backpressure" until the queue is empty; end() closes only
 * after the queue is written; a peer that never reads is dropped at 16 MiB.
 */
import { expect, test } from "bun:test";
import type { Socket } from "bun";
import { SocketSender } from "../../src/sockets/socket-sender.ts";

/** A socket whose kernel takes `room` bytes per write (Infinity: all), recording what it took. */
class ScriptedSocket {
  room = Infinity;
  gone = false;
  ended = 0;
  terminated = 0;
  readonly taken: number[] = [];
  write(bytes: Uint8Array): number {
    if (this.gone) return -1;
    const n = Math.min(this.room, bytes.byteLength);
    for (let i = 0; i < n; i++) this.taken.push(bytes[i]!);
    if (this.room !== Infinity) this.room -= n;
    return n;
  }
  end() {
    this.ended++;
  }
  terminate() {
    this.terminated++;
    this.gone = true;
  }
}

function pair() {
  const socket = new ScriptedSocket();
  const sender = new SocketSender(socket as unknown as Socket<unknown>);
  return { socket, sender };
}

const bytes = (...values: number[]) => new Uint8Array(values);

test("what the kernel takes whole is sent, nothing kept", () => {
  const { socket, sender } = pair();
  expect(sender.send(bytes(1, 2, 3))).toBe("sent");
  expect(sender.bufferedAmount).toBe(0);
  expect(socket.taken).toEqual([1, 2, 3]);
});

test("the rest of a partial write is kept as a copy, and sent first once the socket drains", () => {
  const { socket, sender } = pair();
  socket.room = 2;
  const scratch = bytes(1, 2, 3, 4, 5);
  expect(sender.send(scratch)).toBe("backpressure");
  expect(sender.bufferedAmount).toBe(3);
  // the mux reuses its scratch buffer for the next batch
  scratch.fill(0);
  // more frames while blocked go behind, even if the kernel would take them now
  socket.room = Infinity;
  expect(sender.send(bytes(6, 7))).toBe("backpressure");
  expect(socket.taken).toEqual([1, 2]);
  expect(sender.flush()).toBe(true);
  expect(socket.taken).toEqual([1, 2, 3, 4, 5, 6, 7]);
  expect(sender.bufferedAmount).toBe(0);
  expect(sender.send(bytes(8))).toBe("sent");
  expect(socket.taken).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
});

test("flush() reports false while the socket still takes only part, and keeps the order through many drains", () => {
  const { socket, sender } = pair();
  socket.room = 0;
  const all: number[] = [];
  for (let i = 0; i < 10; i++) {
    const chunk = Uint8Array.from({ length: 7 }, (_, j) => i * 7 + j);
    all.push(...chunk);
    expect(sender.send(chunk)).toBe("backpressure");
  }
  expect(sender.bufferedAmount).toBe(70);
  let drains = 0;
  for (;;) {
    drains++;
    socket.room = 3; // the kernel frees a little each time
    if (sender.flush()) break;
    expect(drains).toBeLessThan(100);
  }
  expect(drains).toBeGreaterThan(10);
  expect(socket.taken).toEqual(all);
  expect(sender.bufferedAmount).toBe(0);
});

test("end() with nothing queued ends the socket at once; later sends are refused", () => {
  const { socket, sender } = pair();
  sender.end();
  expect(socket.ended).toBe(1);
  expect(sender.send(bytes(1))).toBe("closed");
  sender.end();
  expect(socket.ended).toBe(1);
});

test("end() waits for the queue (a last ERROR frame) to be written before ending the socket", () => {
  const { socket, sender } = pair();
  socket.room = 1;
  expect(sender.send(bytes(9, 8, 7))).toBe("backpressure");
  sender.end();
  expect(socket.ended).toBe(0);
  expect(sender.send(bytes(1))).toBe("closed");
  socket.room = 1;
  expect(sender.flush()).toBe(false);
  expect(socket.ended).toBe(0);
  socket.room = Infinity;
  expect(sender.flush()).toBe(true);
  expect(socket.taken).toEqual([9, 8, 7]);
  expect(socket.ended).toBe(1);
});

test("a socket that is gone makes send report closed, now and later", () => {
  const { socket, sender } = pair();
  socket.gone = true;
  expect(sender.send(bytes(1))).toBe("closed");
  socket.gone = false;
  expect(sender.send(bytes(2))).toBe("closed");
  expect(socket.taken).toEqual([]);
});

test("a socket that goes away while bytes are queued: flush gives up and drops the queue", () => {
  const { socket, sender } = pair();
  socket.room = 0;
  expect(sender.send(bytes(1, 2, 3))).toBe("backpressure");
  socket.gone = true;
  expect(sender.flush()).toBe(false);
  expect(sender.bufferedAmount).toBe(0);
  expect(sender.send(bytes(4))).toBe("closed");
});

test("a peer that never reads is dropped once 16 MiB are queued, not grown without bound", () => {
  const { socket, sender } = pair();
  socket.room = 0;
  const chunk = new Uint8Array(1024 * 1024);
  const results: string[] = [];
  for (let i = 0; i < 20 && results.at(-1) !== "closed"; i++) results.push(sender.send(chunk));
  expect(results.slice(0, 16)).toEqual(Array(16).fill("backpressure"));
  expect(results[16]).toBe("closed");
  expect(results).toHaveLength(17);
  expect(socket.terminated).toBe(1);
  expect(sender.bufferedAmount).toBe(0);
  expect(sender.send(bytes(1))).toBe("closed");
});

test("end() cuts off a peer that does not read what is still queued, after the grace period", async () => {
  const socket = new ScriptedSocket();
  const sender = new SocketSender(socket as unknown as Socket<unknown>, 50);
  socket.room = 1;
  expect(sender.send(bytes(1, 2, 3))).toBe("backpressure");
  sender.end();
  expect(socket.terminated).toBe(0);
  const deadline = Date.now() + 2_000;
  while (socket.terminated === 0 && Date.now() < deadline) await Bun.sleep(10);
  expect(socket.terminated).toBe(1);
  expect(sender.send(bytes(4))).toBe("closed");
});

test("end() with nothing queued ends the socket at once and sets no timer that could cut it later", async () => {
  const { socket, sender } = pair();
  sender.end();
  expect(socket.ended).toBe(1);
  await Bun.sleep(20);
  expect(socket.terminated).toBe(0);
});
