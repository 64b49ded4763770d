/**
 * Request smuggling through HTTP/2 to HTTP/1.1 (the downgrade class, as in
 * the 2021 h2-to-h1 research): what reaches an agent stays an HTTP/1.1
 * request, so an h2 field or pseudo-header carrying CR, LF or NUL, a space
 * in the request line's parts, an upper-case or malformed name, a framing
 * field (Transfer-Encoding, Content-Length that the body contradicts) or a
 * Host that differs from :authority would become a second request, a header
 * of the attacker's choosing, or a body read two ways. Against a real
 * server on the engine: each is a malformed request (RST_STREAM
 * PROTOCOL_ERROR), never handed on; the well-formed one becomes exactly the
 * head it says.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { data, ErrorCode, getFields, headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo()));
afterAll(() => server.stop());

const base = (over: Record<string, string>, extra: [string, string][] = []): [string, string][] => [
  ...Object.entries({ ":method": "GET", ":scheme": "https", ":authority": "app.localhost", ":path": "/http1", ...over }),
  ...extra,
];

const cases: [string, [string, string][]][] = [
  ["a CR LF in a field value", base({}, [["x-a", "1\r\ntransfer-encoding: chunked"]])],
  ["a bare LF in a field value", base({}, [["x-a", "1\nx-b: 2"]])],
  ["a NUL in a field value", base({}, [["x-a", "1\0"]])],
  ["a CR LF in :path (a second request line)", base({ ":path": "/http1 HTTP/1.1\r\nhost: other\r\n\r\nGET /admin" })],
  ["a space in :path", base({ ":path": "/http1 HTTP/1.1" })],
  ["a CR LF in :method", base({ ":method": "GET /x HTTP/1.1\r\nx:" })],
  ["a CR LF in :authority", base({ ":authority": "app.localhost\r\nx-injected: 1" })],
  ["a colon in a field name", base({}, [["x:y", "1"]])],
  ["a space in a field name", base({}, [["x y", "1"]])],
  ["an upper-case field name", base({}, [["Transfer-Encoding", "chunked"]])],
  ["Transfer-Encoding", base({}, [["transfer-encoding", "chunked"]])],
  ["a Host other than :authority", base({}, [["host", "admin.localhost"]])],
  ["two content-lengths that disagree", base({}, [["content-length", "1"], ["content-length", "2"]])],
];

describe("HTTP/2 to HTTP/1.1 smuggling", () => {
  for (const [what, fields] of cases) {
    test(`${what}: RST_STREAM PROTOCOL_ERROR, never handed on`, async () => {
      await using client = await rawH2(server.port);
      const before = server.requests;
      client.send(settingsAck(), headers(1, fields), headers(3, base({ ":path": "/after" })));
      await client.until(() => client.frames.body(3) !== "", 10_000, "the next request answered");
      expect(client.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
      expect(server.requests - before).toBe(1);
    });
  }

  test("a body longer than its content-length: RST_STREAM PROTOCOL_ERROR, nothing past the length handed on", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, base({ ":method": "POST", ":path": "/echo" }, [["content-length", "4"]]), false), data(1, "abcdGET /admin HTTP/1.1\r\n\r\n", true));
    await client.until(() => client.frames.resets().has(1), 10_000, "the stream reset");
    expect(client.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(client.frames.body(1)).not.toContain("GET /admin");
  });

  test("a well-formed request becomes exactly its HTTP/1.1 head", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, base({}, [["cookie", "a=1"], ["x-a", "b c"], ["cookie", "b=2"]])));
    await client.until(() => client.frames.body(1) !== "", 10_000, "the answer");
    expect(client.frames.body(1)).toBe("GET /http1 HTTP/1.1\r\nhost: app.localhost\r\ncookie: a=1; b=2\r\nx-a: b c");
  });
});
