/**
 * SocketPipe against scripted sockets: a short write pauses the side that
 * sent it until the other drains, in order and without loss; a FIN is
 * passed on only after what came before it; a clean close ends its
 * direction, an error cuts both; a writer that does not pause is cut
 * rather than buffered without bound. (The real sockets are in
 * tls-front.test.ts.)
 */
import { expect, test } from "bun:test";
import type { Socket } from "bun";
import { SocketPipe } from "../../src/sockets/socket-pipe.ts";

/** A socket whose kernel takes `room` bytes (Infinity: all), noting what was done to it. */
class ScriptedSocket {
  room = Infinity;
  gone = false;
  paused = false;
  shut = false;
  terminated = false;
  readonly taken: number[] = [];
  write(bytes: Uint8Array): number {
    if (this.gone) return -1;
    const n = Math.min(this.room, bytes.byteLength);
    this.taken.push(...bytes.subarray(0, n));
    if (this.room !== Infinity) this.room -= n;
    return n;
  }
  pause() {
    this.paused = true;
  }
  resume() {
    this.paused = false;
  }
  shutdown() {
    this.shut = true;
  }
  terminate() {
    this.terminated = true;
    this.gone = true;
  }
}

function pipe() {
  const a = new ScriptedSocket();
  const b = new ScriptedSocket();
  const p = new SocketPipe(a as unknown as Socket<unknown>, b as unknown as Socket<unknown>);
  return { a, b, p };
}

const bytes = (...values: number[]) => new Uint8Array(values);

test("start: what came first is written, and the paused side resumes only once it is all out", () => {
  const { a, b, p } = pipe();
  a.paused = true;
  b.room = 2;
  p.start(bytes(1, 2, 3), false);
  expect(b.taken).toEqual([1, 2]);
  expect(a.paused).toBe(true);
  b.room = Infinity;
  p.drain("b");
  expect(b.taken).toEqual([1, 2, 3]);
  expect(a.paused).toBe(false);
});

test("a short write pauses the sender; later bytes queue behind in order; drain resumes it", () => {
  const { a, b, p } = pipe();
  b.room = 1;
  const chunk = bytes(1, 2, 3);
  p.data("a", chunk);
  expect(a.paused).toBe(true);
  chunk.fill(9); // the pipe kept a copy
  p.data("a", bytes(4));
  b.room = 2;
  p.drain("b");
  expect(a.paused).toBe(true);
  b.room = Infinity;
  p.drain("b");
  expect(b.taken).toEqual([1, 2, 3, 4]);
  expect(a.paused).toBe(false);
});

test("the other direction is independent", () => {
  const { a, b, p } = pipe();
  a.room = 0;
  p.data("b", bytes(5));
  expect(b.paused).toBe(true);
  p.data("a", bytes(6));
  expect(b.taken).toEqual([6]);
  expect(a.paused).toBe(false);
});

test("a FIN is passed on after the bytes before it, and only then", () => {
  const { a, b, p } = pipe();
  b.room = 0;
  p.data("a", bytes(1, 2));
  p.end("a");
  expect(b.shut).toBe(false);
  b.room = Infinity;
  p.drain("b");
  expect(b.taken).toEqual([1, 2]);
  expect(b.shut).toBe(true);
  // the other way still flows after the half-close
  p.data("b", bytes(3));
  expect(a.taken).toEqual([3]);
});

test("a clean close ends its direction (Bun reports the FIN after our shutdown as a close); an error cuts both", () => {
  const clean = pipe();
  clean.p.closed("a");
  expect(clean.b.shut).toBe(true);
  expect(clean.b.terminated).toBe(false);

  const failed = pipe();
  failed.b.room = 0;
  failed.p.data("a", bytes(1));
  failed.p.closed("b", new Error("ECONNRESET"));
  expect(failed.a.terminated).toBe(true);
  expect(failed.b.terminated).toBe(true);
  failed.p.data("a", bytes(2)); // nothing happens after the cut
});

test("bytes for a side that has closed are dropped, and the sender is not paused for them", () => {
  const { a, b, p } = pipe();
  a.gone = true;
  p.data("b", bytes(1, 2));
  expect(b.paused).toBe(false);
});

test("a sender that goes on after its pause is cut at 4 MiB waiting, not buffered", () => {
  const { a, b, p } = pipe();
  b.room = 0;
  const mib = new Uint8Array(1024 * 1024);
  for (let i = 0; i < 4; i++) p.data("a", mib);
  expect(a.terminated).toBe(false);
  p.data("a", mib);
  expect(a.terminated).toBe(true);
  expect(b.terminated).toBe(true);
});

test("a half-closed pipe is cut once its open direction is idle for the limit, and not while bytes flow", async () => {
  const a = new ScriptedSocket();
  const b = new ScriptedSocket();
  const p = new SocketPipe(a as unknown as Socket<unknown>, b as unknown as Socket<unknown>, 500);
  p.end("a");
  expect(b.shut).toBe(true);
  // bytes the other way, every 50 ms, keep it alive well past the limit
  for (let i = 0; i < 16; i++) {
    await Bun.sleep(50);
    p.data("b", bytes(i));
  }
  expect(a.terminated).toBe(false);
  await Bun.sleep(1_000);
  expect(a.terminated).toBe(true);
  expect(b.terminated).toBe(true);
});

test("a pipe closed on both sides watches nothing", async () => {
  const a = new ScriptedSocket();
  const b = new ScriptedSocket();
  const p = new SocketPipe(a as unknown as Socket<unknown>, b as unknown as Socket<unknown>, 50);
  p.end("a");
  p.end("b");
  p.closed("a");
  p.closed("b");
  await Bun.sleep(150);
  expect(a.terminated).toBe(false);
});
