/**
 * HPACK (src/http2/huffman.ts, hpack-*.ts) against RFC 7541's own examples
 * (Appendix C), round trips through our encoder and decoder, the decoding
 * errors a peer can provoke, and the header list bounded while it decodes.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { HpackDecoder } from "../../src/http2/hpack-decoder.ts";
import { HpackEncoder } from "../../src/http2/hpack-encoder.ts";
import { decodedBound, huffmanDecode, huffmanEncode, huffmanLength } from "../../src/http2/huffman.ts";
import { ConnectionError, ErrorCode } from "../../src/http2/wire.ts";

const hex = (s: string) => new Uint8Array(Buffer.from(s.replace(/\s+/g, ""), "hex"));

function decodeAll(decoder: HpackDecoder, block: Uint8Array, max = 1 << 20): { fields: [string, string][]; within: boolean } {
  const fields: [string, string][] = [];
  const within = decoder.decode(block, max, { field: (n, v) => void fields.push([n, v]) });
  return { fields, within };
}

function compressionError(fn: () => unknown): void {
  let err: unknown;
  try {
    fn();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(ConnectionError);
  expect((err as ConnectionError).code).toBe(ErrorCode.COMPRESSION_ERROR);
}

describe("Huffman code (RFC 7541 Appendix B)", () => {
  const examples: [string, string][] = [
    ["www.example.com", "f1e3c2e5f23a6ba0ab90f4ff"],
    ["no-cache", "a8eb10649cbf"],
    ["custom-key", "25a849e95ba97d7f"],
    ["custom-value", "25a849e95bb8e8b4bf"],
    ["302", "6402"],
    ["private", "aec3771a4b"],
    ["Mon, 21 Oct 2013 20:13:21 GMT", "d07abe941054d444a8200595040b8166e082a62d1bff"],
    ["https://www.example.com", "9d29ad171863c78f0b97c8e9ae82ae43d3"],
    ["foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1", "94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"],
  ];
  for (const [text, coded] of examples) {
    test(`"${text.slice(0, 24)}" codes to the RFC's bytes and back`, () => {
      const out = new Uint8Array(huffmanLength(text));
      expect(huffmanEncode(text, out, 0)).toBe(out.byteLength);
      expect(Buffer.from(out).toString("hex")).toBe(coded);
      const back = new Uint8Array(decodedBound(out.byteLength));
      const n = huffmanDecode(out, 0, out.byteLength, back);
      expect(Buffer.from(back.subarray(0, n)).toString("latin1")).toBe(text);
    });
  }

  test("every octet, and any string, round-trips", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 300 }), (bytes) => {
        const text = Buffer.from(bytes).toString("latin1");
        const out = new Uint8Array(huffmanLength(text));
        huffmanEncode(text, out, 0);
        const back = new Uint8Array(decodedBound(out.byteLength));
        const n = huffmanDecode(out, 0, out.byteLength, back);
        return Buffer.from(back.subarray(0, n)).equals(Buffer.from(bytes));
      }),
    );
  });

  test("padding longer than 7 bits, padding of zeros and an EOS inside are refused", () => {
    const out = new Uint8Array(16);
    // 'a' is 00011: then 3 bits of padding and 8 more ones
    expect(huffmanDecode(new Uint8Array([0x1f, 0xff]), 0, 2, out)).toBe(-1);
    // '0' is 00000, padded with zeros
    expect(huffmanDecode(new Uint8Array([0x00]), 0, 1, out)).toBe(-1);
    // EOS is 30 ones
    expect(huffmanDecode(new Uint8Array([0xff, 0xff, 0xff, 0xff]), 0, 4, out)).toBe(-1);
    // and the proper padding of 'a' is taken
    expect(huffmanDecode(new Uint8Array([0x1f]), 0, 1, out)).toBe(1);
  });
});

describe("HPACK decoding (RFC 7541 Appendix C)", () => {
  test("C.3: requests without Huffman, the dynamic table carried from one to the next", () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex("828684410f7777772e6578616d706c652e636f6d")).fields).toEqual([
      [":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"],
    ]); // prettier-ignore
    expect(decodeAll(d, hex("828684be58086e6f2d6361636865")).fields).toEqual([
      [":method", "GET"], [":scheme", "http"], [":path", "/"], [":authority", "www.example.com"], ["cache-control", "no-cache"],
    ]); // prettier-ignore
    expect(decodeAll(d, hex("828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565")).fields).toEqual([
      [":method", "GET"], [":scheme", "https"], [":path", "/index.html"], [":authority", "www.example.com"], ["custom-key", "custom-value"],
    ]); // prettier-ignore
  });

  test("C.4: the same requests with Huffman", () => {
    const d = new HpackDecoder();
    expect(decodeAll(d, hex("828684418cf1e3c2e5f23a6ba0ab90f4ff")).fields.at(-1)).toEqual([":authority", "www.example.com"]);
    expect(decodeAll(d, hex("828684be5886a8eb10649cbf")).fields.at(-1)).toEqual(["cache-control", "no-cache"]);
    expect(decodeAll(d, hex("828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf")).fields.at(-1)).toEqual(["custom-key", "custom-value"]);
  });

  test("C.6: responses with Huffman in a 256-octet table, entries evicted as it fills", () => {
    const d = new HpackDecoder(256);
    const first = decodeAll(d, hex("488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3"));
    expect(first.fields).toEqual([
      [":status", "302"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:21 GMT"], ["location", "https://www.example.com"],
    ]); // prettier-ignore
    expect(decodeAll(d, hex("4883640effc1c0bf")).fields[0]).toEqual([":status", "307"]);
    const third = decodeAll(
      d,
      hex("88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"),
    );
    expect(third.fields).toEqual([
      [":status", "200"], ["cache-control", "private"], ["date", "Mon, 21 Oct 2013 20:13:22 GMT"], ["location", "https://www.example.com"],
      ["content-encoding", "gzip"], ["set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1"],
    ]); // prettier-ignore
  });
});

describe("HPACK errors are COMPRESSION_ERROR, never a throw of another kind", () => {
  const cases: [string, string][] = [
    ["index 0", "80"],
    ["an index past both tables", "be"],
    ["a table size update after a field", "8220"],
    ["a table size update past the setting", "3fe21f"],
    ["an integer longer than 5 octets", "0fffffffffffff0f"],
    ["a string running past the block", "400561"],
    ["an integer running past the block", "3f"],
    ["a Huffman string with EOS", "000161" + "84ffffffff"],
  ];
  for (const [what, bytes] of cases) test(what, () => compressionError(() => new HpackDecoder().decode(hex(bytes), 1 << 20, { field() {} })));

  test("random bytes either decode or fail with COMPRESSION_ERROR", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        try {
          new HpackDecoder().decode(bytes, 1 << 20, { field() {} });
        } catch (err) {
          return err instanceof ConnectionError && err.code === ErrorCode.COMPRESSION_ERROR;
        }
        return true;
      }),
    );
  });
});

describe("the decoded header list is bounded while it decodes (HPACK bomb)", () => {
  /** A 4,000-byte value put in the table once, then named by one byte each time. */
  function bomb(references: number): Uint8Array {
    const value = "v".repeat(4000);
    // literal with incremental indexing, new name "x", value of 4000 (integer 127 + 3873)
    const head = [0x40, 0x01, 0x78, 0x7f, ...[3873 % 128 | 0x80, Math.floor(3873 / 128)]];
    return new Uint8Array([...head, ...Buffer.from(value), ...new Array(references).fill(0xbe)]);
  }

  test("past the bound no field is made, the block is read to its end, and the table stays in step", () => {
    const d = new HpackDecoder();
    let made = 0;
    const within = d.decode(bomb(10_000), 64 * 1024, { field: () => void made++ });
    expect(within).toBe(false);
    // 16 fields of ~4 KiB fit in 64 KiB: the ten thousand others were never made
    expect(made).toBeLessThanOrEqual(16);
    // the next block refers to the entry the bomb added: it is there
    expect(decodeAll(d, new Uint8Array([0xbe])).fields).toEqual([["x", "v".repeat(4000)]]);
  });

  test("past the bound, literals are skipped, those the table keeps still added", () => {
    const d = new HpackDecoder();
    const fields: [string, string][] = [];
    // a literal that fits, one that goes past the bound, one skipped, and one with incremental indexing past it
    const block = new Uint8Array([0x00, 0x01, 0x61, 0x01, 0x31, 0x00, 0x01, 0x62, 0x03, 0x32, 0x32, 0x32, 0x00, 0x01, 0x64, 0x01, 0x34, 0x40, 0x01, 0x63, 0x01, 0x33]);
    expect(d.decode(block, 40, { field: (n, v) => void fields.push([n, v]) })).toBe(false);
    expect(fields).toEqual([["a", "1"]]);
    expect(decodeAll(d, new Uint8Array([0xbe])).fields).toEqual([["c", "3"]]);
  });

  test("within the bound, every field is handed on", () => {
    const d = new HpackDecoder();
    let made = 0;
    expect(d.decode(bomb(3), 64 * 1024, { field: () => void made++ })).toBe(true);
    expect(made).toBe(4);
  });
});

describe("HPACK encoding", () => {
  test("our encoder's blocks decode to what was given, block after block (the tables in step)", () => {
    const field = fc.tuple(fc.stringMatching(/^[a-z][a-z0-9-]{0,15}$/), fc.string({ unit: fc.integer({ min: 0x20, max: 0xff }).map((c) => String.fromCharCode(c)), maxLength: 40 }));
    fc.assert(
      fc.property(fc.array(fc.tuple(fc.integer({ min: 100, max: 599 }), fc.array(field, { maxLength: 12 })), { maxLength: 20 }), (responses) => {
        const e = new HpackEncoder();
        const d = new HpackDecoder();
        for (const [status, fields] of responses) {
          const got = decodeAll(d, e.encode(status, fields)).fields;
          expect(got).toEqual([[":status", String(status)], ...fields]);
        }
      }),
    );
  });

  test("a field sent again is one byte; set-cookie is never indexed", () => {
    const e = new HpackEncoder();
    e.encode(200, [["content-type", "text/html"], ["set-cookie", "a=1"]]);
    const again = e.encode(200, [["content-type", "text/html"]]);
    expect(again.byteLength).toBe(2); // :status 200 (static) and the dynamic entry
    const cookie = e.encode(undefined, [["set-cookie", "a=1"]]);
    expect(cookie[0]! & 0xf0).toBe(0x10);
  });

  test("a smaller table the client asks for is announced at the next block's start, and followed", () => {
    const e = new HpackEncoder();
    const d = new HpackDecoder();
    decodeAll(d, e.encode(200, [["x-a", "1"], ["x-b", "2"]]));
    e.setPeerTableSize(0);
    const block = e.encode(200, [["x-a", "1"]]);
    expect(block[0]).toBe(0x20); // size update to 0
    expect(decodeAll(d, block).fields).toEqual([[":status", "200"], ["x-a", "1"]]);
    e.setPeerTableSize(4096);
    expect(decodeAll(d, e.encode(200, [["x-a", "1"]])).fields).toEqual([[":status", "200"], ["x-a", "1"]]);
  });
});
