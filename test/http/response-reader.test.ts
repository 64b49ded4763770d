/**
 * The agent's incremental response parser, fed raw bytes in every split:
 * each response must read the same whether it comes whole, byte by byte or
 * cut at any single point, and malformed ones must fail with a reason.
 */
import { describe, expect, test } from "bun:test";
import { parseHead, type ParsedHead } from "../../src/http/response-head.ts";
import { MAX_HEAD_BYTES, ResponseParser } from "../../src/http/response-reader.ts";

interface Reading {
  heads: ParsedHead[];
  body: string;
  ended: number;
  error?: string;
  parser: ResponseParser;
}

/** Feeds `pieces` in order, then (if `close`) the connection's end. */
function read(pieces: (string | Uint8Array)[], opts: { method?: string; close?: boolean } = {}): Reading {
  const r: Omit<Reading, "parser"> = { heads: [], body: "", ended: 0 };
  const parser = new ResponseParser(opts.method ?? "GET", {
    head: (h) => r.heads.push(h),
    body: (piece) => (r.body += Buffer.from(piece).toString("latin1")),
    end: () => r.ended++,
  });
  for (const piece of pieces) {
    const error = parser.push(typeof piece === "string" ? Buffer.from(piece, "latin1") : piece);
    if (error) return { ...r, error, parser };
  }
  if (opts.close) {
    const error = parser.closed();
    if (error) return { ...r, error, parser };
  }
  return { ...r, parser };
}

/** Every way to cut `raw` in two, and byte by byte: all must read like the whole. */
function splits(raw: string): string[][] {
  const out: string[][] = [[raw], raw.split("")];
  for (let i = 1; i < raw.length; i++) out.push([raw.slice(0, i), raw.slice(i)]);
  return out;
}

const CHUNKED =
  "HTTP/1.1 200 OK\r\n" +
  "Transfer-Encoding: chunked\r\n" +
  "Trailer: x-checksum\r\n" +
  "\r\n" +
  "5;name=value;quoted=\"a;b\"\r\nhello\r\n" +
  "1 ; ext\r\n,\r\n" +
  "0006\r\n world\r\n" +
  "0\r\n" +
  "x-checksum: abc\r\n" +
  "x-other: 1\r\n" +
  "\r\n";

describe("framing", () => {
  test("a chunked body with extensions and trailers reads the same in every split", () => {
    for (const pieces of splits(CHUNKED)) {
      const r = read(pieces);
      expect(r.error).toBeUndefined();
      expect(r.body).toBe("hello, world");
      expect(r.ended).toBe(1);
      expect(r.heads).toHaveLength(1);
      expect(r.heads[0]!.framing).toBe("chunked");
      expect(r.heads[0]!.keepAlive).toBe(true);
      expect(r.parser.complete).toBe(true);
      expect(r.parser.overflow).toBe(false);
    }
  });

  test("a sink that reads trailers gets a chunked body's trailer fields before the end, in every split", () => {
    for (const pieces of splits(CHUNKED)) {
      const seen: string[] = [];
      const parser = new ResponseParser("GET", {
        head: () => {},
        body: () => {},
        trailers: (fields) => seen.push(JSON.stringify(fields)),
        end: () => seen.push("end"),
      });
      for (const piece of pieces) expect(parser.push(Buffer.from(piece, "latin1"))).toBeUndefined();
      expect(seen).toEqual([JSON.stringify([["x-checksum", "abc"], ["x-other", "1"]]), "end"]);
    }
  });

  test("no trailers, or a sink that does not read them: no trailers call", () => {
    const seen: string[] = [];
    const parser = new ResponseParser("GET", { head: () => {}, body: () => {}, trailers: () => seen.push("trailers"), end: () => seen.push("end") });
    expect(parser.push(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"))).toBeUndefined();
    expect(seen).toEqual(["end"]);
  });

  test("a trailer section that is no list of fields fails the response for a sink that reads it", () => {
    const parser = new ResponseParser("GET", { head: () => {}, body: () => {}, trailers: () => {}, end: () => {} });
    expect(parser.push(Buffer.from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nno colon here\r\n\r\n"))).toBe("malformed trailer section");
  });

  test("a content-length body reads the same in every split, and ends at its length", () => {
    const raw = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nContent-Type: text/plain\r\n\r\nhello world";
    for (const pieces of splits(raw)) {
      const r = read(pieces);
      expect(r.error).toBeUndefined();
      expect(r.body).toBe("hello world");
      expect(r.ended).toBe(1);
      expect(r.heads[0]!.length).toBe(11);
      expect(r.heads[0]!.keepAlive).toBe(true);
    }
  });

  test("without a length or chunking the body runs until the connection closes", () => {
    const raw = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nall of this, and more";
    for (const pieces of splits(raw)) {
      const open = read(pieces);
      expect(open.ended).toBe(0);
      expect(open.body).toBe("all of this, and more");
      const closed = open.parser.closed();
      expect(closed).toBeUndefined();
      expect(open.parser.complete).toBe(true);
    }
    const r = read([raw], { close: true });
    expect(r.ended).toBe(1);
    expect(r.heads[0]!.framing).toBe("close");
    expect(r.heads[0]!.keepAlive).toBe(false);
  });

  test("a HEAD response has no body even with a Content-Length", () => {
    const r = read(["HTTP/1.1 200 OK\r\nContent-Length: 12345\r\n\r\n"], { method: "HEAD" });
    expect(r.error).toBeUndefined();
    expect(r.ended).toBe(1);
    expect(r.heads[0]!.framing).toBe("none");
    expect(r.heads[0]!.headers).toContainEqual(["Content-Length", "12345"]);
    expect(r.heads[0]!.keepAlive).toBe(true);
  });

  for (const status of [204, 304]) {
    test(`a ${status} has no body, and the next bytes are not taken for one`, () => {
      const r = read([`HTTP/1.1 ${status} Nothing\r\nETag: "v1"\r\n\r\n`]);
      expect(r.ended).toBe(1);
      expect(r.heads[0]!.status).toBe(status);
      expect(r.body).toBe("");
      expect(r.parser.overflow).toBe(false);
      const extra = read([`HTTP/1.1 ${status} Nothing\r\n\r\nstray`]);
      expect(extra.ended).toBe(1);
      expect(extra.body).toBe("");
      expect(extra.parser.overflow).toBe(true);
    });
  }

  test("100 Continue and 103 Early Hints are skipped; the final answer is the one reported", () => {
    const raw = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
    for (const pieces of splits(raw)) {
      const r = read(pieces);
      expect(r.error).toBeUndefined();
      expect(r.heads.map((h) => h.status)).toEqual([201]);
      expect(r.body).toBe("ok");
      expect(r.ended).toBe(1);
    }
  });

  test("101 is a final answer, and the connection is not reused after it", () => {
    const r = read(["HTTP/1.1 101 Switching Protocols\r\nUpgrade: something\r\nConnection: upgrade\r\n\r\n"]);
    expect(r.heads.map((h) => h.status)).toEqual([101]);
    expect(r.ended).toBe(1);
    expect(r.heads[0]!.keepAlive).toBe(false);
  });

  test("repeated fields stay apart and in order, names as sent, values trimmed", () => {
    const r = read(["HTTP/1.1 200 OK\r\nSet-Cookie: a=1, b\r\nX-Multi:  first \r\nset-cookie: c=2\r\nX-Multi:second\r\nContent-Length: 0\r\n\r\n"]);
    expect(r.heads[0]!.headers).toEqual([
      ["Set-Cookie", "a=1, b"],
      ["X-Multi", "first"],
      ["set-cookie", "c=2"],
      ["X-Multi", "second"],
      ["Content-Length", "0"],
    ]);
  });

  test("bytes after a complete response mark the connection as not reusable", () => {
    const r = read(["HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n"]);
    expect(r.body).toBe("ok");
    expect(r.ended).toBe(1);
    expect(r.parser.overflow).toBe(true);
  });
});

describe("keep-alive", () => {
  const cases: [string, boolean][] = [
    ["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true],
    ["HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", false],
    ["HTTP/1.1 200 OK\r\nConnection: Keep-Alive, Close\r\nContent-Length: 0\r\n\r\n", false],
    ["HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false],
    ["HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", true],
    // both framings at once: read by chunks, but never trusted with another request
    ["HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false],
  ];
  for (const [raw, expected] of cases) {
    test(`${JSON.stringify(raw.split("\r\n\r\n")[0])} -> ${expected ? "reusable" : "not reusable"}`, () => {
      const r = read([raw]);
      expect(r.error).toBeUndefined();
      expect(r.ended).toBe(1);
      expect(r.heads[0]!.keepAlive).toBe(expected);
    });
  }
});

describe("malformed responses fail with a reason", () => {
  test("a head larger than the limit is refused, whole or trickled", () => {
    const huge = `HTTP/1.1 200 OK\r\nX-Big: ${"a".repeat(MAX_HEAD_BYTES)}\r\n\r\n`;
    expect(read([huge]).error).toContain("response head larger than");
    const pieces: string[] = [];
    for (let i = 0; i < huge.length; i += 1000) pieces.push(huge.slice(i, i + 1000));
    const trickled = read(pieces);
    expect(trickled.error).toContain("response head larger than");
    expect(trickled.heads).toHaveLength(0);
  });

  test("a head just under the limit is accepted", () => {
    const prefix = "HTTP/1.1 200 OK\r\nX-Big: ";
    const suffix = "\r\nContent-Length: 0\r\n\r\n";
    const raw = prefix + "a".repeat(MAX_HEAD_BYTES - prefix.length - suffix.length) + suffix;
    expect(raw.length).toBe(MAX_HEAD_BYTES);
    for (const pieces of [[raw], [raw.slice(0, 30_000), raw.slice(30_000)]]) {
      const r = read(pieces);
      expect(r.error).toBeUndefined();
      expect(r.ended).toBe(1);
    }
  });

  const badChunks: [string, string][] = [
    ["x\r\nhello\r\n0\r\n\r\n", "malformed chunk size"],
    ["\r\n", "malformed chunk size"],
    ["-5\r\nhello\r\n0\r\n\r\n", "malformed chunk size"],
    ["0x5\r\nhello\r\n0\r\n\r\n", "malformed chunk size"],
    ["5 5\r\nhello\r\n0\r\n\r\n", "malformed chunk size"],
    ["fffffffffffff\r\n", "chunk size too large"],
    ["5\nhello\r\n0\r\n\r\n", "malformed chunk size"],
    ["5\r\rhello\r\n0\r\n\r\n", "chunk line not ended by CRLF"],
    ["5\r\nhelloX\r\n0\r\n\r\n", "chunk data not followed by CRLF"],
    ["5\r\nhelloX\n0\r\n\r\n", "chunk data not followed by CRLF"],
    ["5\r\nhello\n0\r\n\r\n", "chunk data not followed by CRLF"],
    ["5;ext\x00\r\nhello\r\n0\r\n\r\n", "malformed chunk extension"],
    [`5;${"e".repeat(5000)}\r\nhello\r\n0\r\n\r\n`, "chunk line too long"],
    ["0\r\nx-trailer: a\nb\r\n\r\n", "malformed trailer"],
    ["0\r\n\rX", "chunked body not ended by CRLF"],
  ];
  for (const [body, reason] of badChunks) {
    test(`chunked body ${JSON.stringify(body.slice(0, 30))}: ${reason}`, () => {
      const raw = `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${body}`;
      for (const pieces of [[raw], raw.split("")]) {
        const r = read(pieces);
        expect(r.error).toBe(reason);
        expect(r.ended).toBe(0);
      }
    });
  }

  const badHeads: [string, string][] = [
    ["HTTP/2 200 OK", "malformed status line"],
    ["HTTP/1.1 20 OK", "malformed status line"],
    ["HTTP/1.1 099 Low", "malformed status line"],
    ["ICY 200 OK", "malformed status line"],
    ["HTTP/1.1 200 OK\r\nNo-Colon", "malformed header line"],
    ["HTTP/1.1 200 OK\r\nX-A: 1\r\n folded", "malformed header line"],
    ["HTTP/1.1 200 OK\r\nX-Space : 1", "malformed header name"],
    [`HTTP/1.1 200 OK\r\nX-${"n".repeat(300)}: 1`, "header name longer than 256 characters"],
    [`HTTP/1.1 200 OK\r\n${"X-A: 1\r\n".repeat(1001)}X-B: 2`, "more than 1000 header fields"],
    ["HTTP/1.1 200 OK\r\nX-Ctl: a\x01b", "control characters in header"],
    ["HTTP/1.1 200 OK\r\nX-Cr: a\rb", "control characters in header"],
    ["HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6", "invalid content-length"],
    ["HTTP/1.1 200 OK\r\nContent-Length: 5, 6", "invalid content-length"],
    ["HTTP/1.1 200 OK\r\nContent-Length: -1", "invalid content-length"],
    ["HTTP/1.1 200 OK\r\nContent-Length: 0x10", "invalid content-length"],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked", "unsupported transfer-encoding"],
    ["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked", "unsupported transfer-encoding"],
  ];
  for (const [head, reason] of badHeads) {
    test(`head ${JSON.stringify(head.slice(-30))}: ${reason}`, () => {
      const r = read([`${head}\r\n\r\nbody`]);
      expect(r.error).toStartWith(reason);
      expect(r.heads).toHaveLength(0);
    });
  }

  test("the same Content-Length twice is one length", () => {
    const r = read(["HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2, 2\r\n\r\nok"]);
    expect(r.error).toBeUndefined();
    expect(r.heads[0]!.length).toBe(2);
    expect(r.body).toBe("ok");
  });

  test("an endless run of interim responses is refused", () => {
    const r = read(["HTTP/1.1 100 Continue\r\n\r\n".repeat(100)]);
    expect(r.error).toContain("interim responses");
  });

  test("a connection that closes early says where", () => {
    expect(read([], { close: true }).error).toBe("the local service closed the connection without answering");
    expect(read(["HTTP/1.1 200 OK\r\nContent-"], { close: true }).error).toContain("in the middle of its response head");
    expect(read(["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"], { close: true }).error).toBe("the local service broke off its response");
    expect(read(["HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"], { close: true }).error).toBe("the local service broke off its response");
  });
});

describe("reading a head for its framing only", () => {
  const heads = [
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nX-A: 1",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close",
    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0",
    "HTTP/1.1 204 No Content\r\nX-B: 2",
    "HTTP/1.1 200 OK\r\nX-Space : 1",
    "HTTP/1.1 200 OK\r\nX-Ctl: a\x01b",
    "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2",
  ];
  test.each(heads.map((h) => [JSON.stringify(h).slice(0, 50), h]))("%s: the same framing, keep-alive, status and fault as a full read", (_, head) => {
    const full = parseHead(head, "GET", true);
    const lean = parseHead(head, "GET", false);
    if (typeof full === "string") return expect(lean).toBe(full);
    expect(typeof lean).toBe("object");
    const { headers: _h, ...rest } = full;
    const { headers: _l, ...leanRest } = lean as Exclude<typeof lean, string>;
    expect(leanRest).toEqual(rest);
  });
});
