/**
 * The passive WebSocket frame reader the inspector watches switched
 * connections with: messages come out whole whatever the cuts (masked or
 * not, fragmented, control frames between fragments, every length form),
 * at most `keep` bytes of each are held, and bytes it cannot follow make it
 * give up quietly, never throw.
 */
import { describe, expect, test } from "bun:test";
import { WebSocketFrameReader, type WsMessage } from "../../src/http/ws-frame-reader.ts";
import { chop, concat, prng, randomBytes } from "../protocol/support.ts";
import { MASK, wsFrame } from "./ws-frames.ts";

function read(pieces: Uint8Array[], keep = 1 << 20): { messages: WsMessage[]; gaveUp: boolean } {
  const messages: WsMessage[] = [];
  const reader = new WebSocketFrameReader(keep, (m) => messages.push(m));
  for (const p of pieces) reader.push(p);
  return { messages, gaveUp: reader.gaveUp };
}

const text = (m: WsMessage) => (m.text ? Buffer.from(m.data).toString() : [...m.data]);

describe("messages", () => {
  const big = randomBytes(7, 70_000); // a 64-bit length form
  const medium = "m".repeat(300); // a 16-bit length form
  const stream = concat([
    wsFrame({ opcode: 1, payload: "hello", mask: MASK }),
    wsFrame({ opcode: 2, payload: new Uint8Array([1, 2, 3]) }),
    wsFrame({ opcode: 1, payload: "frag", fin: false, mask: MASK }),
    wsFrame({ opcode: 9, payload: "ping", mask: MASK }), // a control frame between fragments
    wsFrame({ opcode: 0, payload: "mented", fin: false, mask: MASK }),
    wsFrame({ opcode: 0, payload: "", mask: MASK }),
    wsFrame({ opcode: 1, payload: medium }),
    wsFrame({ opcode: 2, payload: big, mask: MASK }),
    wsFrame({ opcode: 1, payload: "" }),
    wsFrame({ opcode: 8, payload: new Uint8Array([0x03, 0xe8]) }),
  ]);
  const expected = ["hello", [1, 2, 3], "fragmented", medium, [...big], ""];

  test("whole, byte by byte, and cut at random: the same messages, unmasked, control frames skipped", () => {
    expect(read([stream]).messages.map(text)).toEqual(expected);
    expect(read(chop(stream, prng(1), 1)).messages.map(text)).toEqual(expected);
    for (let seed = 0; seed < 50; seed++) {
      const r = read(chop(stream, prng(seed), 1 + (seed % 17) * 997));
      expect(r.gaveUp).toBe(false);
      expect(r.messages.map(text)).toEqual(expected);
    }
  });

  test("at most `keep` bytes of a message are held; its size is all of it", () => {
    const r = read(chop(stream, prng(3), 4096), 16);
    expect(r.messages.map((m) => [m.data.byteLength, m.size])).toEqual([
      [5, 5],
      [3, 3],
      [10, 10],
      [16, 300],
      [16, 70_000],
      [0, 0],
    ]);
    expect(Buffer.from(r.messages[3]!.data).toString()).toBe("m".repeat(16));
    expect([...r.messages[4]!.data]).toEqual([...big.subarray(0, 16)]);
  });

  test("the bytes it reads are never changed, Buffers (whose slice() is a view) included", () => {
    const wire = Buffer.from(stream);
    const before = Buffer.from(wire);
    expect(read(chop(wire, prng(5), 700)).messages.map(text)).toEqual(expected);
    expect(wire.equals(before)).toBe(true);
  });

  test("a compressed message (RSV1) is shown as the bytes that passed", () => {
    const r = read([wsFrame({ opcode: 1, payload: new Uint8Array([0xf2, 0x48]), rsv1: true })]);
    expect(r.messages.map((m) => [m.text, [...m.data]])).toEqual([[false, [0xf2, 0x48]]]);
  });
});

describe("what it cannot follow", () => {
  test.each([
    ["a reserved opcode", wsFrame({ opcode: 3, payload: "x" })],
    ["a continuation with no message", wsFrame({ opcode: 0, payload: "x" })],
    ["a new message inside a fragmented one", concat([wsFrame({ opcode: 1, payload: "a", fin: false }), wsFrame({ opcode: 1, payload: "b" })])],
    ["a fragmented control frame", wsFrame({ opcode: 9, payload: "x", fin: false })],
    ["a length past 2^53", new Uint8Array([0x82, 0x7f, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0])],
  ])("%s: it gives up quietly, and reads nothing after", (_what, bytes) => {
    const r = read([bytes, wsFrame({ opcode: 1, payload: "after" })]);
    expect(r.gaveUp).toBe(true);
    expect(r.messages).toEqual([]);
  });

  test("any bytes in any pieces: no throw, and no more held than `keep` per message", () => {
    for (let seed = 0; seed < 200; seed++) {
      const rand = prng(seed);
      const bytes = randomBytes(seed, 1 + Math.floor(rand() * 5000));
      const r = read(chop(bytes, rand, 300), 64);
      for (const m of r.messages) expect(m.data.byteLength).toBeLessThanOrEqual(64);
    }
  });
});
