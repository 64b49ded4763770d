/**
 * The edge's request head parser and head reader: what a visitor's head
 * becomes (method, target, version, fields as sent, framing), and every way
 * a head can be read two ways refused with the status to answer.
 */
import { describe, expect, test } from "bun:test";
import { HeadReader } from "../../src/http/head-reader.ts";
import { everyField, isRefusal, parseRequestHead, type HeadRefusal, type RequestHead } from "../../src/http/request-head.ts";

const parse = (lines: string[]): RequestHead => {
  const head = parseRequestHead(lines.join("\r\n"));
  if (isRefusal(head)) throw new Error(`refused: ${head.status} ${head.why}`);
  return head;
};
const refusal = (lines: string[]): HeadRefusal => {
  const head = parseRequestHead(lines.join("\r\n"));
  if (!isRefusal(head)) throw new Error(`accepted: ${JSON.stringify(head)}`);
  return head;
};

describe("what a head becomes", () => {
  test("method, target, version and fields as sent, names' case and order kept", () => {
    const h = parse(["POST /a/b?c=d%20e HTTP/1.1", "Host: app.localhost:8080", "X-Mixed-Case: 1", "content-length: 5", "Accept:  text/html  "]);
    expect(h.method).toBe("POST");
    expect(h.target).toBe("/a/b?c=d%20e");
    expect(h.minor).toBe(1);
    expect(h.host).toBe("app.localhost:8080");
    expect(h.fields).toEqual([
      ["Host", "app.localhost:8080"],
      ["X-Mixed-Case", "1"],
      ["content-length", "5"],
      ["Accept", "text/html"],
    ]);
    expect(h.framing).toBe("length");
    expect(h.length).toBe(5);
    expect(h.keepAlive).toBe(true);
  });

  test("HTTP/1.0 is kept, keeps alive only when asked, and needs no Host", () => {
    expect(parse(["GET / HTTP/1.0"]).minor).toBe(0);
    expect(parse(["GET / HTTP/1.0"]).keepAlive).toBe(false);
    expect(parse(["GET / HTTP/1.0", "Connection: Keep-Alive"]).keepAlive).toBe(true);
    expect(parse(["GET / HTTP/1.1", "Host: a", "Connection: close"]).keepAlive).toBe(false);
  });

  test("a chunked body, a zero length, no body", () => {
    expect(parse(["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked"]).framing).toBe("chunked");
    expect(parse(["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: gzip, chunked"]).framing).toBe("chunked");
    expect(parse(["POST / HTTP/1.1", "Host: a", "Content-Length: 0"]).framing).toBe("none");
    expect(parse(["GET / HTTP/1.1", "Host: a"]).framing).toBe("none");
    // a GET may carry a body: it is passed on as sent
    expect(parse(["GET / HTTP/1.1", "Host: a", "Content-Length: 3"]).length).toBe(3);
    // the same length repeated is one length
    expect(parse(["POST / HTTP/1.1", "Host: a", "Content-Length: 7", "Content-Length: 7"]).length).toBe(7);
    expect(parse(["POST / HTTP/1.1", "Host: a", "Content-Length: 7, 7"]).length).toBe(7);
  });

  test("Expect: 100-continue and Upgrade are noticed", () => {
    expect(parse(["POST / HTTP/1.1", "Host: a", "Expect: 100-Continue", "Content-Length: 1"]).expectContinue).toBe(true);
    expect(parse(["GET / HTTP/1.1", "Host: a", "Connection: keep-alive, Upgrade", "Upgrade: WebSocket"]).upgrade).toBe("websocket");
    // Upgrade without Connection: upgrade is no request to switch
    expect(parse(["GET / HTTP/1.1", "Host: a", "Upgrade: websocket"]).upgrade).toBeUndefined();
  });

  test("an absolute-form target names the host and becomes its path", () => {
    const h = parse(["GET http://app.localhost:8080/x?y HTTP/1.1", "Host: other"]);
    expect(h.host).toBe("app.localhost:8080");
    expect(h.target).toBe("/x?y");
    expect(parse(["GET http://app.localhost HTTP/1.1"]).target).toBe("/");
    expect(parse(["OPTIONS * HTTP/1.1", "Host: a"]).target).toBe("*");
  });
});

describe("what is refused, and with which status", () => {
  test.each([
    ["both Transfer-Encoding and Content-Length", ["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked", "Content-Length: 5"], 400],
    ["lengths that disagree", ["POST / HTTP/1.1", "Host: a", "Content-Length: 5", "Content-Length: 6"], 400],
    ["a length that is no number", ["POST / HTTP/1.1", "Host: a", "Content-Length: 0x10"], 400],
    ["a negative length", ["POST / HTTP/1.1", "Host: a", "Content-Length: -1"], 400],
    ["chunked twice", ["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked, chunked"], 400],
    ["chunked not last", ["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked, gzip"], 400],
    ["a coding without chunked", ["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: gzip"], 501],
    ["Transfer-Encoding in HTTP/1.0", ["POST / HTTP/1.0", "Transfer-Encoding: chunked"], 400],
    ["an obsolete folded line", ["GET / HTTP/1.1", "Host: a", "X-A: b", " c"], 400],
    ["whitespace before the colon", ["GET / HTTP/1.1", "Host : a"], 400],
    ["a line without a colon", ["GET / HTTP/1.1", "Host: a", "nonsense"], 400],
    ["an empty name", ["GET / HTTP/1.1", "Host: a", ": b"], 400],
    ["a NUL in a value", ["GET / HTTP/1.1", "Host: a", "X-A: a\0b"], 400],
    ["a bare CR in a value", ["GET / HTTP/1.1", "Host: a", "X-A: a\rb"], 400],
    ["a bare LF in a value", ["GET / HTTP/1.1", "Host: a", "X-A: a\nb"], 400],
    ["two Hosts", ["GET / HTTP/1.1", "Host: a", "Host: b"], 400],
    ["no Host in HTTP/1.1", ["GET / HTTP/1.1"], 400],
    ["HTTP/2.0", ["GET / HTTP/2.0", "Host: a"], 505],
    ["HTTP/1.2", ["GET / HTTP/1.2", "Host: a"], 505],
    ["a lower-case version", ["GET / http/1.1", "Host: a"], 505],
    ["a target with no slash", ["GET x HTTP/1.1", "Host: a"], 400],
    ["CONNECT", ["CONNECT a:443 HTTP/1.1", "Host: a"], 400],
    ["* but for OPTIONS", ["GET * HTTP/1.1", "Host: a"], 400],
    ["two spaces in the request line", ["GET  / HTTP/1.1", "Host: a"], 400],
    ["a method that is no token", ["G(ET / HTTP/1.1", "Host: a"], 400],
    ["an expectation other than 100-continue", ["POST / HTTP/1.1", "Host: a", "Expect: something"], 417],
    ["too many fields", ["GET / HTTP/1.1", "Host: a", ...Array.from({ length: 300 }, (_, i) => `X-${i}: 1`)], 431],
  ])("%s", (_, lines, status) => {
    expect(refusal(lines as string[]).status as number).toBe(status as number);
  });
});

describe("reading heads as bytes arrive", () => {
  const HEAD = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";

  test("a head in one piece, in two at every cut, byte by byte: the same text and the bytes after it", () => {
    const raw = `${HEAD}BODY`;
    const cuts: string[][] = [[raw], raw.split("")];
    for (let i = 1; i < raw.length; i++) cuts.push([raw.slice(0, i), raw.slice(i)]);
    for (const pieces of cuts) {
      const reader = new HeadReader(1024);
      let found: { text: string; rest: string } | undefined;
      for (const piece of pieces) {
        const bytes = Buffer.from(piece, "latin1");
        if (found) {
          found.rest += piece;
          continue;
        }
        const read = reader.read(bytes, 0);
        if (typeof read === "string") {
          expect(read).toBe("incomplete");
          continue;
        }
        found = { text: read.text, rest: bytes.toString("latin1", read.next) };
      }
      expect(found).toEqual({ text: "GET / HTTP/1.1\r\nHost: a", rest: "BODY" });
    }
  });

  test("lines ending in LF alone are refused at once, not waited on", () => {
    expect(new HeadReader(1024).read(Buffer.from("GET / HTTP/1.1\nHost: a\n\n"), 0)).toBe("bare-lf");
    expect(new HeadReader(1024).read(Buffer.from("GET / HTTP/1.1\r\nHost: a\r\n\n"), 0)).toBe("bare-lf");
    const reader = new HeadReader(1024);
    expect(reader.read(Buffer.from("GET / HTTP/1.1\nHost: a\n"), 0)).toBe("incomplete");
    expect(reader.read(Buffer.from("\n"), 0)).toBe("bare-lf");
  });

  test("a head past the limit is refused, whole or in pieces, and what is held stays bounded", () => {
    expect(new HeadReader(100).read(Buffer.alloc(200, 0x61), 0)).toBe("too-large");
    const reader = new HeadReader(100);
    let result: string | object = "incomplete";
    for (let i = 0; i < 50 && result === "incomplete"; i++) result = reader.read(Buffer.alloc(10, 0x61), 0);
    expect(result).toBe("too-large");
    expect(reader.pending).toBeLessThanOrEqual(100);
  });
});

describe("reading a head without keeping its fields", () => {
  test.each([
    ["GET / HTTP/1.1", "Host: a", "X-A: 1", "Accept: */*"],
    ["POST / HTTP/1.1", "Host: a", "Transfer-Encoding: chunked", "Connection: close"],
    ["PUT / HTTP/1.1", "Host: a", "Expect: 100-continue", "Content-Length: 5"],
    ["GET / HTTP/1.1", "Host: a", "Connection: Upgrade", "Upgrade: websocket"],
    ["GET / HTTP/1.1", "Host: a", "X-A: a\u0000b"],
    ["GET / HTTP/1.1", "Host : a"],
    ["GET / HTTP/1.1", "Host: a", "Host: b"],
  ])("%s...: the same decisions and refusals as a full read", (...lines) => {
    const full = parseRequestHead(lines.join("\r\n"), true);
    const lean = parseRequestHead(lines.join("\r\n"), false);
    if (isRefusal(full)) return expect(lean).toEqual(full);
    const { fields: _f, names: _n, whole: _w, ...rest } = full;
    const { fields: _lf, names: _ln, whole: _lw, ...leanRest } = lean as RequestHead;
    expect(leanRest).toEqual(rest);
    expect([full.whole, (lean as RequestHead).whole]).toEqual([true, false]);
  });
});

describe("the rest of a head's fields, read once when a reader needs them all", () => {
  const text = ["GET /a HTTP/1.1", "Host: a", "X-A: 1", "Cookie: c=1", "X-Forwarded-For: 203.0.113.9", "Accept: */*", "X-A: 2"].join("\r\n");
  test.each([
    ["none", false],
    ["some", new Set([6])],
  ] as const)("a head parsed for %s of them gets every field, in order, as a whole parse has them", (_, fields) => {
    const full = parseRequestHead(text, true) as RequestHead;
    const part = parseRequestHead(text, fields) as RequestHead;
    expect(part.fields).not.toEqual(full.fields);
    const every = everyField(part, text);
    expect(every).toBe(part); // kept on the head
    expect([every.fields, every.names, every.whole]).toEqual([full.fields, full.names, true]);
    const fields_ = every.fields;
    expect(everyField(part, text).fields).toBe(fields_); // never read twice
  });

  test("a head parsed whole is given as it is", () => {
    const full = parseRequestHead(text, true) as RequestHead;
    const fields = full.fields;
    expect(everyField(full, "").fields).toBe(fields);
  });
});
