/**
 * A response read for a sink that passes its input on itself
 * (ResponseSink.inPlace, what the edge does with most responses): the bytes
 * it passes on (the input's first inPlaceEnd bytes, or what raw() was handed
 * when they do not lie there in order) are, in every split of the input,
 * exactly the bytes a sink that is handed every piece by raw() passes on:
 * heads only once whole and read, nothing past a response's end. And a sink
 * that reads no body or no head bytes is handed neither.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { ResponseParser, type ResponseSink } from "../../src/http/response-reader.ts";
import { fuzzParams } from "../harness/fuzz.ts";

/** What a sink passes on from `pieces` (latin1 text), and how the reading ended. */
function passedOn(pieces: string[], inPlace: boolean, method = "GET", lean = true): { out: string; ended: boolean; error?: string } {
  let out = "";
  let raw: Uint8Array[] = [];
  let ended = false;
  const sink: ResponseSink = {
    head() {},
    body() {},
    end: () => (ended = true),
    raw: (bytes) => void raw.push(bytes),
    inPlace,
  };
  const parser = new ResponseParser(method, sink, !lean);
  for (const p of pieces) {
    const input = Buffer.from(p, "latin1");
    raw = [];
    const error = parser.push(input);
    if (error) return { out, ended, error };
    const end = inPlace ? parser.inPlaceEnd : -1;
    if (end >= 0) out += input.toString("latin1", 0, end);
    else for (const r of raw) out += Buffer.from(r).toString("latin1");
    if (parser.complete) break;
  }
  return { out, ended };
}

/** `text` cut at `cuts` (sorted, deduplicated offsets inside it). */
function cutAt(text: string, cuts: number[]): string[] {
  const out: string[] = [];
  let at = 0;
  for (const c of [...new Set(cuts)].sort((a, b) => a - b)) {
    if (c <= at || c >= text.length) continue;
    out.push(text.slice(at, c));
    at = c;
  }
  out.push(text.slice(at));
  return out;
}

const RESPONSES = [
  "HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello",
  "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
  "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nX-T: 1\r\n\r\n",
  "HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n",
  "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
  "HTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n",
];
const PAST_THE_END = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";

describe("in place, the same bytes go on as through raw()", () => {
  test.each(RESPONSES.map((r) => [JSON.stringify(r.slice(0, 40)), r]))("%s, whole and cut at any one point", (_, response) => {
    const text = response + PAST_THE_END; // what follows a response's end is never passed on
    for (let i = 0; i <= text.length; i++) {
      const pieces = cutAt(text, [i]);
      for (const lean of [true, false]) {
        const views = passedOn(pieces, false, "GET", lean);
        const inPlace = passedOn(pieces, true, "GET", lean);
        expect(inPlace).toEqual(views);
        expect(views.out).toBe(response);
      }
    }
  });

  test("in any number of pieces", () => {
    fc.assert(
      fc.property(fc.constantFrom(...RESPONSES), fc.array(fc.integer({ min: 1, max: 200 }), { maxLength: 8 }), (response, cuts) => {
        const pieces = cutAt(response + PAST_THE_END, cuts);
        const views = passedOn(pieces, false);
        expect(passedOn(pieces, true)).toEqual(views);
        expect(views.out).toBe(response);
      }),
      fuzzParams(500, 2_000),
    );
  });

  test("a malformed head fails alike, and nothing of it goes on", () => {
    for (const bad of ["HTTP/1.1 200 OK\r\nX-A: a\nb\r\n\r\n", "HTTP/1.1 200 OK\r\nX-A: a\r\n\n", "HTTP/1.1 2000 OK\r\n\r\n"]) {
      for (let i = 1; i < bad.length; i++) {
        const pieces = cutAt(bad, [i]);
        const inPlace = passedOn(pieces, true);
        expect(inPlace).toEqual(passedOn(pieces, false));
        expect(inPlace.error).toBeDefined();
        expect(inPlace.out).toBe("");
      }
    }
  });
});

describe("what a sink does not read is not made", () => {
  test("readsBody false: no body piece; readsHeadBytes false: a lean head has no bytes", () => {
    let pieces = 0;
    let bytes: Uint8Array | undefined;
    const sink: ResponseSink = {
      head: (h) => void (bytes = h.bytes),
      body: () => void pieces++,
      end() {},
      readsBody: false,
      readsHeadBytes: false,
    };
    const parser = new ResponseParser("GET", sink, false);
    parser.push(Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "latin1"));
    expect(parser.complete).toBe(true);
    expect(pieces).toBe(0);
    expect(bytes).toBeUndefined();
    parser.reset("GET", { ...sink, readsBody: true, readsHeadBytes: true }, false);
    parser.push(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n", "latin1"));
    expect(parser.complete).toBe(true);
    expect(pieces).toBe(1);
    expect(Buffer.from(bytes!).toString("latin1")).toBe("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
  });
});

describe("a sink that copies from where the bytes lie", () => {
  test("is told the head's place and each body piece's, in every split, and they hold the head and the body", () => {
    const response = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
    for (let i = 1; i < response.length; i++) {
      let head = "";
      let body = "";
      let views = 0;
      const sink: ResponseSink = {
        head: (_h, src, from, to) => void (head = Buffer.from(src!.subarray(from!, to!)).toString("latin1")),
        body: () => void views++,
        bodyIn: (src, from, to) => void (body += Buffer.from(src.subarray(from, to)).toString("latin1")),
        end() {},
        readsHeadBytes: false,
      };
      const parser = new ResponseParser("GET", sink, false);
      for (const piece of cutAt(response, [i])) parser.push(Buffer.from(piece, "latin1"));
      expect(parser.complete).toBe(true);
      expect(head).toBe("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
      expect(body).toBe("0123456789");
      expect(views).toBe(0);
    }
  });
});
