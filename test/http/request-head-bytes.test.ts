/**
 * The request head read from its bytes (http/request-head-bytes.ts) is a
 * shortcut, never a second set of rules: whenever it gives an answer, it is
 * parseRequestHead's answer for the same head, whatever fields the caller
 * reads; it never answers for a head parseRequestHead refuses, nor for one
 * with a line that ends in LF alone (its reader no longer searches such heads
 * for one); and the heads clients commonly send do take it.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { hasBareLf } from "../../src/http/head-reader.ts";
import { isRefusal, parseRequestHead } from "../../src/http/request-head.ts";
import { requestHeadOf } from "../../src/http/request-head-bytes.ts";
import { EDGE_READS } from "../../src/edge/forward.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const bytes = (head: string) => Buffer.from(`${head}\r\n\r\n`, "latin1");
const READERS: [string, boolean | ReadonlySet<number>][] = [
  ["every field", true],
  ["no field (the agent)", false],
  ["the edge's fields", EDGE_READS],
];

/** requestHeadOf's answer for `head` (text without its blank line) with each reader's fields, checked against parseRequestHead's. */
function both(head: string, maxFields = 256) {
  let answered: boolean | undefined;
  for (const [, fields] of READERS) {
    const fast = requestHeadOf(bytes(head), fields, maxFields);
    const slow = parseRequestHead(head, fields, maxFields);
    if (fast !== undefined) {
      expect(isRefusal(slow)).toBe(false);
      expect(fast).toEqual(slow as typeof fast);
      expect(hasBareLf(bytes(head))).toBe(false);
    }
    // the same head takes the shortcut for every reader, or for none
    if (answered !== undefined) expect(fast !== undefined).toBe(answered);
    answered = fast !== undefined;
  }
  return answered;
}

describe("the heads clients send take the shortcut, with parseRequestHead's answer", () => {
  test.each([
    ["wrk", "GET /1k.bin HTTP/1.1\r\nHost: peers.localhost:45065"],
    ["curl", "GET /api/me?x=1 HTTP/1.1\r\nHost: myapp.tunnels.example.com\r\nUser-Agent: curl/7.88.1\r\nAccept: */*"],
    [
      "a browser",
      "GET /index.html HTTP/1.1\r\nHost: a.example\r\nConnection: keep-alive\r\nsec-ch-ua: \"Chromium\";v=\"120\"\r\nUpgrade-Insecure-Requests: 1\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\nAccept: text/html,*/*;q=0.8\r\nAccept-Encoding: gzip, deflate, br\r\nAccept-Language: en-GB,en;q=0.9\r\nCookie: a=b; c=d",
    ],
    ["as the edge sends it on", "GET /1k.bin HTTP/1.1\r\nHost: peers.localhost:45065\r\nX-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: peers.localhost:45065\r\nX-Real-IP: 127.0.0.1\r\nForwarded: for=127.0.0.1;proto=http;host=\"peers.localhost:45065\""],
    ["a body by length", "POST /form HTTP/1.1\r\nHost: a\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 11"],
    ["a chunked body", "PUT /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue"],
    ["closing", "DELETE /x HTTP/1.1\r\nhost: a\r\nconnection: close"],
    ["HTTP/1.0", "GET / HTTP/1.0"],
    ["HTTP/1.0 kept alive", "HEAD / HTTP/1.0\r\nConnection: Keep-Alive\r\nHost: a"],
    ["a WebSocket", "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13"],
    ["burrow's own fields, in another spelling", "GET / HTTP/1.1\r\nHost: a\r\nX_Burrow_User: mallory\r\nx-burrow-user-email: m@example.com"],
    ["a path made normal", "GET /a/./b/../c//d?q=/.. HTTP/1.1\r\nHost: a"],
    ["an unknown method", "PROPFIND /dav HTTP/1.1\r\nHost: a\r\nDepth: 1"],
    ["obs-text and tabs in values", "GET / HTTP/1.1\r\nHost: a\r\nX-A:\tv\xe9 \t\r\nX-B:"],
  ])("%s", (_, head) => {
    expect(both(head)).toBe(true);
  });
});

describe("what it does not fully understand goes to parseRequestHead", () => {
  test.each([
    ["absolute form", "GET http://a.example/x HTTP/1.1\r\nHost: b"],
    ["asterisk form", "OPTIONS * HTTP/1.1\r\nHost: a"],
    ["HTTP/2", "GET / HTTP/2.0\r\nHost: a"],
    ["HTTP/1.2", "GET / HTTP/1.2\r\nHost: a"],
    ["no Host", "GET / HTTP/1.1"],
    ["two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b"],
    ["both framings", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nTransfer-Encoding: chunked"],
    ["lengths that disagree", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1, 2"],
    ["another coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip"],
    ["another expectation", "POST / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok"],
    ["obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\r\n b"],
    ["a space before the colon", "GET / HTTP/1.1\r\nHost : a"],
    ["a NUL", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\x00b"],
    ["a bare CR", "GET / HTTP/1.1\r\nHost: a\r\nX-A: a\rb"],
    ["a bare LF", "GET / HTTP/1.1\r\nHost: a\nX-A: b"],
    ["LF LF", "GET / HTTP/1.1\r\nHost: a\n\nX-A: b"],
    ["a path it refuses", "GET /a%2fb HTTP/1.1\r\nHost: a"],
    ["a fragment", "GET /a#b HTTP/1.1\r\nHost: a"],
    ["two spaces", "GET  / HTTP/1.1\r\nHost: a"],
    ["an empty line first", "\r\nGET / HTTP/1.1\r\nHost: a"],
  ])("%s", (_, head) => {
    expect(both(head)).toBe(false);
  });

  test("more fields than allowed", () => {
    expect(both("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2", 2)).toBe(false);
    expect(both("GET / HTTP/1.1\r\nHost: a\r\nX-A: 1", 2)).toBe(true);
  });

  test("a name longer than allowed", () => {
    expect(both(`GET / HTTP/1.1\r\nHost: a\r\n${"x".repeat(257)}: 1`)).toBe(false);
    expect(both(`GET / HTTP/1.1\r\nHost: a\r\n${"x".repeat(256)}: 1`)).toBe(true);
  });
});

test("on any head, an answer from the bytes is parseRequestHead's answer", () => {
  const name = fc.constantFrom("Host", "host", "HOST", "Content-Length", "content-length", "Transfer-Encoding", "Connection", "Upgrade", "Expect", "X-Forwarded-For", "X-Real-IP", "forwarded", "X_Burrow_User", "User-Agent", "Cookie", "X-A", "Content-Length ", " X", "");
  const value = fc.oneof(fc.constantFrom("a", "0", "12", "00012", "chunked", "Chunked", "gzip, chunked", "close", "keep-alive", "Upgrade", "upgrade, keep-alive", "websocket", "100-continue", "a, b", "", " 5 ", "1,1", "\t7"), fc.string({ maxLength: 12 }));
  const line = fc.tuple(name, fc.constantFrom(":", ": ", ":\t", " :"), value).map(([n, c, v]) => `${n}${c}${v}`);
  const method = fc.oneof(fc.constantFrom("GET", "POST", "HEAD", "OPTIONS", "CONNECT", "get", "M-SEARCH"), fc.string({ maxLength: 6 }));
  const target = fc.oneof(fc.constantFrom("/", "/a?b", "/a/../b", "//x", "/%41", "/%2f", "*", "http://h/x", "/a b", "/\x7f"), fc.string({ maxLength: 10 }).map((s) => `/${s}`));
  const version = fc.constantFrom("HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/2.0", "http/1.1", "HTTP/1.1 ");
  fc.assert(
    fc.property(method, fc.constantFrom(" ", "  ", "\t"), target, version, fc.array(line, { maxLength: 6 }), fc.constantFrom("\r\n", "\n"), (m, sp, t, v, lines, eol) => {
      const head = [`${m}${sp}${t} ${v}`, ...lines].join(eol);
      if (head.includes("\r\n\r\n")) return; // a blank line ends a head: not one head
      both(head);
    }),
    fuzzParams(3000, 10_000),
  );
});
