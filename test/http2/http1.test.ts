/**
 * An h2 request as the HTTP/1.1 request an agent gets, and an HTTP/1.1
 * response head as h2 response fields (src/http2/http1.ts).
 */
import { describe, expect, test } from "bun:test";
import { parseHead } from "../../src/http/response-head.ts";
import { h2Response, http1HeadText, http1Request, isHttp1Refusal } from "../../src/http2/http1.ts";
import type { H2Request } from "../../src/http2/request-fields.ts";

const request = (over: Partial<H2Request> = {}): H2Request => ({
  method: "GET",
  scheme: "https",
  authority: "app.tunnel.localhost",
  path: "/a?b=1",
  fields: [],
  contentLength: -1,
  ...over,
});

describe("an h2 request as an HTTP/1.1 head", () => {
  test("pseudo-headers become the request line and Host; the fields follow in order", () => {
    const text = http1HeadText(request({ fields: [["accept", "*/*"], ["x-a", "1"]] }), false);
    expect(text).toBe("GET /a?b=1 HTTP/1.1\r\nhost: app.tunnel.localhost\r\naccept: */*\r\nx-a: 1");
  });

  test("cookie crumbs are joined with '; ' where the first was (RFC 9113 §8.2.3)", () => {
    const text = http1HeadText(request({ fields: [["x-a", "1"], ["cookie", "a=1"], ["x-b", "2"], ["cookie", "b=2"]] }), false);
    expect(text).toBe("GET /a?b=1 HTTP/1.1\r\nhost: app.tunnel.localhost\r\nx-a: 1\r\ncookie: a=1; b=2\r\nx-b: 2");
  });

  test("a body without a length is sent chunked; with one, as it is; TE and a Host that :authority repeats are left out", () => {
    const chunked = http1Request(request({ method: "POST", fields: [["te", "trailers"], ["host", "app.tunnel.localhost"]] }), true);
    if (isHttp1Refusal(chunked)) throw new Error(chunked.why);
    expect(chunked.text).toBe("POST /a?b=1 HTTP/1.1\r\nhost: app.tunnel.localhost\r\ntransfer-encoding: chunked");
    expect(chunked.head.framing).toBe("chunked");
    const length = http1Request(request({ method: "POST", fields: [["content-length", "5"]], contentLength: 5 }), true);
    if (isHttp1Refusal(length)) throw new Error(length.why);
    expect(length.head.framing).toBe("length");
    expect(length.head.length).toBe(5);
  });

  test("the head is parsed as a visitor's: its Host read, its path made normal", () => {
    const r = http1Request(request({ path: "/a/./b/../c" }), false);
    if (isHttp1Refusal(r)) throw new Error(r.why);
    expect(r.head.host).toBe("app.tunnel.localhost");
    expect(r.head.target).toBe("/a/c");
    expect(r.head.targetAsSent).toBe(false);
  });

  test("no :authority: the client's Host field names the host", () => {
    const r = http1Request(request({ authority: undefined, fields: [["host", "other.localhost"]] }), false);
    if (isHttp1Refusal(r)) throw new Error(r.why);
    expect(r.head.host).toBe("other.localhost");
  });

  test("what the HTTP/1.1 parser refuses is a refusal with its status: CONNECT, no host at all, too many fields", () => {
    expect(http1Request(request({ method: "CONNECT", scheme: undefined, path: undefined }), false)).toMatchObject({ status: 400 });
    expect(http1Request(request({ authority: undefined }), false)).toMatchObject({ status: 400 });
    const many = request({ fields: Array.from({ length: 20 }, (_, i) => [`x-${i}`, "1"] as [string, string]) });
    expect(http1Request(many, false, true, 16)).toMatchObject({ status: 431 });
  });
});

describe("an HTTP/1.1 response head as h2 response fields", () => {
  test("connection-specific fields are dropped, names lower-cased, the status kept", () => {
    const head = parseHead("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nConnection: keep-alive, X-Hop\r\nKeep-Alive: timeout=5\r\nX-Hop: 1\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2", "GET");
    if (typeof head === "string") throw new Error(head);
    expect(h2Response(head)).toEqual({ status: 200, fields: [["content-type", "text/plain"], ["set-cookie", "a=1"], ["set-cookie", "b=2"]] });
  });

  test("Content-Length is kept where it says the body's length", () => {
    const head = parseHead("HTTP/1.1 404 Not Found\r\nContent-Length: 9", "GET");
    if (typeof head === "string") throw new Error(head);
    expect(h2Response(head)).toEqual({ status: 404, fields: [["content-length", "9"]] });
  });

  test("a 101 cannot be carried", () => {
    const head = parseHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade", "GET");
    if (typeof head === "string") throw new Error(head);
    expect(typeof h2Response(head)).toBe("string");
  });
});
