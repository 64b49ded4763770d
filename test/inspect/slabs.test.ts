/**
 * The inspector keeps captured bytes (bodies, response heads) in slabs it
 * writes again once their captures have left (inspector/body.ts): what the
 * API shows of every capture still held is exactly what passed, after the
 * slabs have gone round many times, and what was read out of a capture
 * stays as it was when its slab is written again.
 */
import { describe, expect, test } from "bun:test";
import { CaptureStore } from "../../src/agent/inspector/store.ts";
import type { TappedRequest } from "../../src/agent/inspector/tap.ts";
import type { TunnelView } from "../../src/agent/output.ts";

const tunnel: TunnelView = { name: "web", id: "t1", protocol: "http", url: "http://web.example", local: "localhost:3000", target: { host: "localhost", port: 3000 }, inspect: true };
const meta = (path: string): TappedRequest => ({ method: "GET", path, headers: [["Host", "web.example"]], websocket: false, remote: "1.2.3.4:5" });

/** A body of `n` bytes that says which request it belongs to in every byte. */
const bodyOf = (i: number, n: number) => new Uint8Array(n).fill(i % 251);
/** A response head as a service sends it, blank line included, in a buffer the transport reuses. */
const headOf = (i: number) => Buffer.from(`HTTP/1.1 200 OK\r\nX-Request: ${i}\r\nContent-Length: 10\r\n\r\n`, "latin1");

/** One captured exchange whose bytes come in a shared buffer that is overwritten after each call, as a socket's reads are. */
function exchange(store: CaptureStore, i: number, scratch: Uint8Array): void {
  const c = store.begin(tunnel, meta(`/${i}`))!;
  const head = headOf(i);
  scratch.set(head);
  c.response(200, scratch.subarray(0, head.byteLength));
  scratch.fill(0xee);
  const pieces = 1 + (i % 3); // one piece, or a body that comes in several
  for (let p = 0; p < pieces; p++) {
    const piece = bodyOf(i, 100 + (i % 700));
    scratch.set(piece);
    c.responseChunk(scratch.subarray(0, piece.byteLength));
    scratch.fill(0xee);
  }
  c.done();
}

function expectHeld(store: CaptureStore, i: number): void {
  const c = store.list().find((x) => x.head.path === `/${i}`)!;
  expect(c.responseHeaders).toEqual([
    ["X-Request", String(i)],
    ["Content-Length", "10"],
  ]);
  const pieces = 1 + (i % 3);
  const n = 100 + (i % 700);
  const bytes = c.responseBody.bytes();
  expect(bytes.byteLength).toBe(pieces * n);
  expect(bytes.every((b) => b === i % 251)).toBe(true);
}

describe("captured bytes in slabs written again", () => {
  test("every capture still held shows what passed, after the slabs went round many times", () => {
    // the default 1,000 kept hold several slabs' worth (about 1.2 MiB); 20,000 exchanges write each slab again many times
    const store = new CaptureStore(1000);
    const scratch = new Uint8Array(4096);
    for (let i = 0; i < 20_000; i++) {
      exchange(store, i, scratch);
      // someone looks now and then, mid-way: the oldest held and the newest
      if (i % 997 === 0 && i >= 1000) {
        expectHeld(store, i - 999);
        expectHeld(store, i);
      }
    }
    expect(store.size).toBe(1000);
    for (let i = 20_000 - 1000; i < 20_000; i++) expectHeld(store, i);
    store.clear(); // the slabs are shared: what this store held goes back for the next test
  });

  test("bytes read out of a capture stay as they were once it has left and its slab is written again", () => {
    const store = new CaptureStore(5);
    const scratch = new Uint8Array(4096);
    exchange(store, 3, scratch); // a body in one piece
    const first = store.list()[0]!;
    const body = first.responseBody.bytes();
    const copy = Uint8Array.from(body);
    for (let i = 4; i < 5_000; i++) exchange(store, i, scratch);
    expect(store.get(first.id)).toBeUndefined();
    expect(Buffer.compare(body, copy)).toBe(0);
  });

  test("a capture that left keeps nothing and copies nothing more", () => {
    const store = new CaptureStore(1);
    const old = store.begin(tunnel, meta("/old"))!;
    old.responseChunk(bodyOf(1, 500));
    store.begin(tunnel, meta("/new"))!.done();
    old.responseChunk(bodyOf(1, 500)); // still streaming after it left
    expect(old.responseBody.captured).toBe(0);
    expect(store.heldBytes).toBe(0);
  });
});
