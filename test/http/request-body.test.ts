/**
 * RequestBodyReader follows a request body by its framing: where it ends
 * (in the piece that ends it) and what it holds, in any split, without
 * touching the bytes.
 */
import { describe, expect, test } from "bun:test";
import { RequestBodyReader } from "../../src/http/request-body.ts";
import { chop, prng } from "../protocol/support.ts";

const bytes = (s: string) => Buffer.from(s, "latin1");

/** Feeds pieces until the body ends: its data, the error if any, and what followed it. */
function follow(reader: RequestBodyReader, pieces: Uint8Array[]): { data: string; error?: string; after: string } {
  let data = "";
  let after = "";
  for (const p of pieces) {
    if (reader.done) {
      after += Buffer.from(p).toString("latin1");
      continue;
    }
    const error = reader.feed(p, (piece) => (data += Buffer.from(piece).toString("latin1")));
    if (error) return { data, error, after };
    if (reader.done) after += Buffer.from(p.subarray(reader.endedAt)).toString("latin1");
  }
  return { data, after };
}

describe("RequestBodyReader", () => {
  test("no body: done at once", () => {
    expect(new RequestBodyReader("none", 0).done).toBe(true);
    expect(new RequestBodyReader("length", 0).done).toBe(true);
  });

  test("a Content-Length body ends at its length, in any split; what follows is not its", () => {
    const wire = bytes("hello worldNEXT");
    for (let seed = 0; seed < 30; seed++) {
      const reader = new RequestBodyReader("length", 11);
      expect(follow(reader, chop(wire, prng(seed), 4))).toEqual({ data: "hello world", after: "NEXT" });
      expect(reader.done).toBe(true);
    }
  });

  test("a chunked body is read through its sizes, extensions and trailers, in any split", () => {
    const wire = bytes("5;a=b\r\nhello\r\n1\r\n \r\n005\r\nworld\r\n0\r\nX-Sum: 1\r\n\r\nNEXT");
    for (let seed = 0; seed < 30; seed++) {
      const reader = new RequestBodyReader("chunked", 0);
      expect(follow(reader, chop(wire, prng(seed), 5))).toEqual({ data: "hello world", after: "NEXT" });
    }
  });

  test("a malformed chunked body is an error with a reason; one cut short is simply not done", () => {
    expect(follow(new RequestBodyReader("chunked", 0), [bytes("zz\r\n")]).error).toBe("malformed chunk size");
    const short = new RequestBodyReader("chunked", 0);
    expect(follow(short, [bytes("5\r\nhel")])).toEqual({ data: "hel", after: "" });
    expect(short.done).toBe(false);
  });
});
