import { describe, expect, spyOn, test } from "bun:test";
import { encodeCloseRecord, encodeRecord, MAX_WS_MESSAGE, RecordDecoder, RecordKind } from "../../src/protocol/ws-records.ts";
import { between, bytes, chop, concat, prng, randomBytes } from "./support.ts";

type Message = string | Uint8Array;

/** Feeds pieces to a fresh decoder and returns what it delivered, binary messages as plain copies. */
function decodeAll(pieces: readonly Uint8Array[]): Message[] {
  const decoder = new RecordDecoder();
  const out: Message[] = [];
  for (const piece of pieces) decoder.push(piece, (m) => out.push(typeof m === "string" ? m : new Uint8Array(m)));
  return out;
}

function header(kind: number, length: number): Uint8Array {
  const out = new Uint8Array(5);
  out[0] = kind;
  new DataView(out.buffer).setUint32(1, length);
  return out;
}

describe("record encoding", () => {
  test("a text message is kind 1, a u32 big-endian UTF-8 length, then the UTF-8 bytes", () => {
    const record = encodeRecord("héllo");
    expect(record).toEqual(new Uint8Array([RecordKind.TEXT, 0, 0, 0, 6, 0x68, 0xc3, 0xa9, 0x6c, 0x6c, 0x6f]));
  });

  test("a binary message is kind 2, its length, then its bytes", () => {
    expect(encodeRecord(new Uint8Array([0, 255, 7]))).toEqual(new Uint8Array([RecordKind.BINARY, 0, 0, 0, 3, 0, 255, 7]));
  });

  test("empty text and empty binary messages stay distinct", () => {
    expect(decodeAll([encodeRecord(""), encodeRecord(new Uint8Array(0))])).toEqual(["", new Uint8Array(0)]);
  });

  const samples: Message[] = [
    "hello",
    "emoji 🦫 and ü",
    "",
    new Uint8Array([1, 2, 3]),
    new Uint8Array(0),
    randomBytes(1, 70_000),
    "x".repeat(100_000),
  ];
  for (const [i, sample] of samples.entries()) {
    const what = typeof sample === "string" ? `text of ${sample.length} chars` : `binary of ${sample.byteLength} bytes`;
    test(`sample ${i} (${what}) decodes to the message that was encoded`, () => {
      const out = decodeAll([encodeRecord(sample)]);
      expect(out).toEqual([sample]);
      expect(typeof out[0]).toBe(typeof sample);
    });
  }

  test("a binary record whose bytes are a view into a larger buffer encodes only the view", () => {
    const backing = bytes("__abc__");
    expect(decodeAll([encodeRecord(backing.subarray(2, 5))])).toEqual([bytes("abc")]);
  });
});

describe("chaotic chunking", () => {
  /** Many records of mixed kinds and sizes, including records bigger than a DATA frame. */
  function corpus(seed: number): Message[] {
    const rand = prng(seed);
    const messages: Message[] = [];
    for (let i = 0; i < 300; i++) {
      const size = rand() < 0.05 ? between(rand, 65_000, 200_000) : between(rand, 0, 300);
      if (rand() < 0.4) messages.push(`#${i} ` + "ab€🦫".repeat(size >> 3));
      else messages.push(randomBytes(seed * 1000 + i, size));
    }
    return messages;
  }

  for (const seed of [1, 2, 3, 4]) {
    test(`seed ${seed}: the concatenated records, split at random boundaries, decode to the same messages`, () => {
      const messages = corpus(seed);
      const stream = concat(messages.map(encodeRecord));
      const rand = prng(seed);
      // mostly small pieces so headers are split often, some large ones that hold many records at once
      const pieces: Uint8Array[] = [];
      for (let at = 0; at < stream.byteLength; ) {
        const r = rand();
        const n = Math.min(r < 0.3 ? 1 : r < 0.8 ? between(rand, 2, 16) : between(rand, 17, 100_000), stream.byteLength - at);
        pieces.push(stream.subarray(at, at + n));
        at += n;
      }
      expect(pieces.some((p) => p.byteLength === 1)).toBe(true);
      expect(decodeAll(pieces)).toEqual(messages);
    });
  }

  test("records fed one byte at a time decode to the same messages", () => {
    const messages: Message[] = ["a", new Uint8Array([1]), "", new Uint8Array(0), "ü€🦫", randomBytes(9, 2000), "end"];
    const stream = concat(messages.map(encodeRecord));
    expect(decodeAll(chop(stream, prng(5), 1))).toEqual(messages);
  });

  test("a piece that ends exactly between two records delivers the first at once", () => {
    const decoder = new RecordDecoder();
    const out: Message[] = [];
    const two = concat([encodeRecord("one"), encodeRecord("two")]);
    decoder.push(two.subarray(0, 8), (m) => out.push(m));
    expect(out).toEqual(["one"]);
    decoder.push(two.subarray(8), (m) => out.push(m));
    expect(out).toEqual(["one", "two"]);
  });

  test("a message is not delivered until its last byte arrives", () => {
    const decoder = new RecordDecoder();
    const out: Message[] = [];
    const record = encodeRecord(randomBytes(3, 1000));
    decoder.push(record.subarray(0, record.byteLength - 1), (m) => out.push(m));
    expect(out).toEqual([]);
    decoder.push(record.subarray(record.byteLength - 1), (m) => out.push(m));
    expect(out.length).toBe(1);
  });

  test("a delivered binary message does not change when the pieces it came from are reused", () => {
    const decoder = new RecordDecoder();
    const out: Uint8Array[] = [];
    const piece = encodeRecord(bytes("keep"));
    decoder.push(piece, (m) => out.push(m as Uint8Array));
    piece.fill(0);
    expect(out).toEqual([bytes("keep")]);
  });

  test("a big record whose header arrives split is reassembled copying each byte a bounded number of times", () => {
    // A header split across pieces once made the decoder concatenate everything buffered on every
    // later push: quadratic in the record size (this 1 MiB record cost over 1 GB of copying; a 16 MiB one, minutes of CPU).
    const size = 1024 * 1024;
    const record = encodeRecord(randomBytes(11, size));
    const pieces = [record.subarray(0, 3), ...chop(record.subarray(3), prng(11), 1024)];
    const concatSpy = spyOn(Buffer, "concat");
    try {
      const out = decodeAll(pieces);
      expect(out.length).toBe(1);
      expect((out[0] as Uint8Array).byteLength).toBe(size);
      const copied = concatSpy.mock.results.reduce((n, r) => n + (r.value as Buffer).byteLength, 0);
      expect(copied).toBeLessThan(4 * record.byteLength);
    } finally {
      concatSpy.mockRestore();
    }
  });
});

describe("record refusals", () => {
  test("a length header beyond MAX_WS_MESSAGE is refused as soon as the header is complete", () => {
    const decoder = new RecordDecoder();
    const head = header(RecordKind.BINARY, MAX_WS_MESSAGE + 1);
    // the first four bytes are not yet a header: nothing to judge
    decoder.push(head.subarray(0, 4), () => {});
    expect(() => decoder.push(head.subarray(4), () => {})).toThrow(`WebSocket message of ${MAX_WS_MESSAGE + 1} bytes exceeds ${MAX_WS_MESSAGE}`);
  });

  test("an oversized text record is refused before any of its body arrives", () => {
    expect(() => new RecordDecoder().push(header(RecordKind.TEXT, 0xffffffff), () => {})).toThrow(/exceeds/);
  });

  test("a record of exactly MAX_WS_MESSAGE bytes is accepted", () => {
    const decoder = new RecordDecoder();
    const out: Message[] = [];
    decoder.push(header(RecordKind.BINARY, MAX_WS_MESSAGE), (m) => out.push(m));
    decoder.push(new Uint8Array(MAX_WS_MESSAGE), (m) => out.push(m));
    expect(out.length).toBe(1);
    expect((out[0] as Uint8Array).byteLength).toBe(MAX_WS_MESSAGE);
  });

  test("records after good ones are still judged: an oversized one behind a valid one is refused", () => {
    const decoder = new RecordDecoder();
    const out: Message[] = [];
    const stream = concat([encodeRecord("fine"), header(RecordKind.BINARY, MAX_WS_MESSAGE + 1)]);
    expect(() => decoder.push(stream, (m) => out.push(m))).toThrow(/exceeds/);
    expect(out).toEqual(["fine"]);
  });

  test("a close record carries its code and reason; a code a peer may not send becomes 1000", () => {
    const closes: [number, string][] = [];
    const decoder = new RecordDecoder();
    decoder.push(concat([encodeCloseRecord(4001, "bye"), encodeCloseRecord(1006, "dropped")]), () => {}, (c, r) => closes.push([c, r]));
    expect(closes).toEqual([
      [4001, "bye"],
      [1000, "dropped"],
    ]);
  });

  test("a close record too short to hold its code is refused", () => {
    expect(() => new RecordDecoder().push(concat([header(RecordKind.CLOSE, 1), new Uint8Array([0])]), () => {})).toThrow(/shorter/);
  });

  for (const kind of [0, 4, 0x7f, 0xff]) {
    test(`a record of kind ${kind} is refused`, () => {
      expect(() => new RecordDecoder().push(concat([header(kind, 1), new Uint8Array([0])]), () => {})).toThrow(
        `bad WebSocket record kind ${kind}`,
      );
    });
  }

  test("a bad kind is refused from its header alone, without waiting for the body", () => {
    expect(() => new RecordDecoder().push(header(9, 1000), () => {})).toThrow(/bad WebSocket record kind 9/);
  });
});
