/**
 * The response head read from its bytes (http/response-head-bytes.ts) is a
 * shortcut, never a second set of rules: whenever it gives an answer, it is
 * parseHead's answer for the same head; and the heads services commonly send
 * do take the shortcut.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { framingOf } from "../../src/http/response-head-bytes.ts";
import { parseHead } from "../../src/http/response-head.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const bytes = (head: string) => Buffer.from(`${head}\r\n\r\n`, "latin1");
const framing = (h: { status: number; minor: number; framing: string; length: number; keepAlive: boolean }) => ({ status: h.status, minor: h.minor, framing: h.framing, length: h.length, keepAlive: h.keepAlive });

/** framingOf's answer for `head` (text without its blank line), checked against parseHead's. */
function both(head: string, method = "GET") {
  const fast = framingOf(bytes(head), method);
  const slow = parseHead(head, method, false);
  if (fast !== undefined) {
    expect(typeof slow).toBe("object");
    expect(framing(fast)).toEqual(framing(slow as Exclude<typeof slow, string>));
  }
  return fast;
}

describe("the heads services send take the shortcut, with parseHead's answer", () => {
  test.each([
    ["nginx, a file", "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Fri, 27 Nov 2026 11:16:37 GMT\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\nConnection: keep-alive\r\nETag: \"6b096695-400\"\r\nAccept-Ranges: bytes", "GET"],
    ["Bun.serve", "HTTP/1.1 200 OK\r\ncontent-type: text/plain;charset=utf-8\r\nDate: Fri, 27 Nov 2026 11:16:37 GMT\r\nContent-Length: 1024", "GET"],
    ["chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked", "GET"],
    ["closes", "HTTP/1.1 500 Internal Server Error\r\nConnection: Close\r\nContent-Length: 5", "GET"],
    ["read until close", "HTTP/1.1 200 OK\r\nContent-Type: text/html", "GET"],
    ["HTTP/1.0 kept alive", "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2", "GET"],
    ["HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 2", "GET"],
    ["HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 99", "HEAD"],
    ["204", "HTTP/1.1 204 No Content", "DELETE"],
    ["304", "HTTP/1.1 304 Not Modified\r\nETag: x", "GET"],
    ["101", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade", "GET"],
    ["100", "HTTP/1.1 100 Continue", "POST"],
    ["no reason", "HTTP/1.1 200\r\nContent-Length: 0", "GET"],
    ["an empty reason", "HTTP/1.1 200 \r\nContent-Length: 0", "GET"],
    ["both lengths and chunks", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked", "GET"],
    ["obs-text and tabs in values", "HTTP/1.1 200 Fine\r\nX-A:\tv\xe9 \t\r\nContent-Length: 0", "GET"],
  ])("%s", (_, head, method) => {
    expect(both(head, method)).toBeDefined();
  });
});

describe("what it does not fully understand goes to parseHead", () => {
  test.each([
    ["two lengths", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 1"],
    ["a listed length", "HTTP/1.1 200 OK\r\nContent-Length: 1, 1"],
    ["another coding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked"],
    ["a Connection list", "HTTP/1.1 200 OK\r\nConnection: keep-alive, Upgrade\r\nContent-Length: 0"],
    ["obs-fold", "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 0"],
    ["a space before the colon", "HTTP/1.1 200 OK\r\nContent-Length : 0"],
    ["a NUL", "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0"],
    ["a bare CR", "HTTP/1.1 200 OK\r\nX-A: a\rb\r\nContent-Length: 0"],
    ["HTTP/2", "HTTP/2 200\r\nContent-Length: 0"],
    ["a status of two digits", "HTTP/1.1 20 OK\r\nContent-Length: 0"],
    ["a long length", "HTTP/1.1 200 OK\r\nContent-Length: 1234567890123456"],
  ])("%s", (_, head) => {
    expect(both(head)).toBeUndefined();
  });
});

test("on any head, an answer from the bytes is parseHead's answer", () => {
  const token = fc.constantFrom("Content-Length", "content-length", "Transfer-Encoding", "Connection", "CONNECTION", "X-A", "Date", "Upgrade", "Content-Length ", " X", "");
  const value = fc.oneof(fc.constantFrom("0", "12", "00012", "chunked", "Chunked", "gzip", "close", "keep-alive", "Upgrade", "a, b", "", " 5 ", "1,1", "\t7"), fc.string({ maxLength: 12 }));
  const line = fc.tuple(token, fc.constantFrom(":", ": ", ":\t", " :"), value).map(([n, c, v]) => `${n}${c}${v}`);
  const status = fc.oneof(fc.constantFrom("HTTP/1.1 200 OK", "HTTP/1.0 200 OK", "HTTP/1.1 204 No Content", "HTTP/1.1 101 Switching", "HTTP/1.1 304", "HTTP/1.1 100 Continue"), fc.string({ maxLength: 20 }));
  fc.assert(
    fc.property(status, fc.array(line, { maxLength: 6 }), fc.constantFrom("GET", "HEAD", "POST"), (first, lines, method) => {
      const head = [first, ...lines].join("\r\n");
      if (head.includes("\r\n\r\n")) return; // a blank line ends a head: not one head
      both(head, method);
    }),
    fuzzParams(3000, 10_000),
  );
});
