/**
 * Response splitting by an HTTP/2 service (--upstream-protocol h2c). HPACK
 * carries any bytes in a field, CR and LF included, so an h2c service could
 * hand the agent a field that, written into the HTTP/1.1 response the agent
 * makes for the edge, would be header lines (or a whole second response) of
 * its own making, or a Transfer-Encoding that frames the body another way
 * than the agent does. Each such answer is malformed HTTP/2 (RFC 9113
 * §8.2.1, §8.2.2, §8.3.2): the visitor gets a 502 that says why (or, once
 * the head went, a cut response), and nothing of the injected text reaches
 * the edge.
 */
import { describe, expect, test } from "bun:test";
import { data, headers } from "../harness/h2-frames.ts";
import { rawH2Server } from "../harness/h2-raw-server.ts";
import { cleanedUp, fetchThrough, requestHead } from "../agent/raw-service.ts";

const { tunnel } = cleanedUp();
const INJECTED = "X-Injected: yes";

/** A service whose every answer is HEADERS with `fields`, then "body" and the end (trailers `trailers`, when given). */
async function answered(fields: [string, string][], trailers?: [string, string][]) {
  await using svc = rawH2Server({
    onHead: (conn, head) => {
      const s = head.stream;
      if (trailers) return conn.send(headers(s, fields, false), data(s, "body"), headers(s, trailers, true));
      conn.send(headers(s, fields, false), data(s, "body", true));
    },
  });
  const t = tunnel(svc.port, { target: { upstreamProtocol: "h2c" } });
  return await fetchThrough(t, { head: requestHead("GET", "/") });
}

describe("response splitting by an h2c service: a malformed answer is a 502, never lines of its own", () => {
  const cases: [string, [string, string][], RegExp][] = [
    ["CR LF in a value", [[":status", "200"], ["x-a", `b\r\n${INJECTED}`]]],
    ["a lone LF in a value", [[":status", "200"], ["x-a", `b\n${INJECTED}`]]],
    ["a whole second response in a value", [[":status", "200"], ["x-a", `b\r\n\r\nHTTP/1.1 200 OK\r\n${INJECTED}\r\n\r\n`]]],
    ["NUL in a value", [[":status", "200"], ["x-a", "b\0c"]]],
    ["CR LF in a name", [[":status", "200"], [`x-a\r\n${INJECTED.toLowerCase()}`, "b"]]],
    ["a colon and space in a name", [[":status", "200"], ["x-injected: yes\r\nx-b", "b"]]],
    ["an upper-case name", [[":status", "200"], ["X-Injected", "yes"]]],
    ["CR LF in :status", [[":status", `200\r\n${INJECTED}`]]],
    ["Transfer-Encoding, which would frame the body its own way", [[":status", "200"], ["transfer-encoding", "chunked"]]],
    ["Connection, which would speak for the edge's connection", [[":status", "200"], ["connection", "close"]]],
    ["two content-lengths that disagree", [[":status", "200"], ["content-length", "4"], ["content-length", "40"]]],
    ["a request's pseudo-header field", [[":status", "200"], [":path", "/"]]],
    ["no :status", [["x-a", "b"]]],
    ["101, which HTTP/2 has no use for", [[":status", "101"], ["upgrade", "websocket"]]],
  ].map(([what, fields]) => [what as string, fields as [string, string][], /UPSTREAM_FAILED the service's response is malformed: /]);

  for (const [what, fields, reason] of cases) {
    test(`${what}: 502 with the reason, nothing passed on`, async () => {
      const res = await answered(fields);
      expect(res.replied).toBe(false);
      expect(res.bytes.length).toBe(0);
      expect(res.reset).toMatch(reason);
    });
  }

  test("CR LF in a trailer's value: the response is cut before its end, the line never written", async () => {
    const res = await answered([[":status", "200"]], [["grpc-message", `x\r\n${INJECTED}`]]);
    expect(res.replied).toBe(true);
    expect(res.reset).toMatch(/UPSTREAM_FAILED the service's response is malformed: /);
    expect(res.text).not.toContain(INJECTED);
    expect(res.text).not.toContain("0\r\n");
  });

  test("a pseudo-header field in the trailers: cut, not passed on", async () => {
    const res = await answered([[":status", "200"]], [[":status", "200"]]);
    expect(res.reset).toMatch(/UPSTREAM_FAILED the service's response is malformed: a pseudo-header field in trailers/);
  });

  test("a well-formed answer with the same fields' values, checked the same way, goes on whole", async () => {
    const res = await answered([[":status", "200"], ["x-a", "b: c \t d"]], [["grpc-message", "fine"]]);
    expect(res.reset).toBeUndefined();
    expect(res.text).toBe("HTTP/1.1 200 OK\r\nx-a: b: c \t d\r\ntransfer-encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\ngrpc-message: fine\r\n\r\n");
  });
});
