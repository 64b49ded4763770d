/**
 * A bad HTTP/2 connection preface: bytes that are not "PRI * HTTP/2.0..."
 * (an HTTP/1.1 request, noise), a preface that never completes (a
 * slow-loris before the first frame), or a first frame other than SETTINGS.
 * Against a real server on the engine: the connection is closed (GOAWAY
 * PROTOCOL_ERROR where a frame can be said), nothing is handed on, and a
 * preface trickled past --h2-idle-timeout is cut.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, getFields, headers, ping, PREFACE } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo({ limits: { idleTimeoutMs: 1_500 } })));
afterAll(() => server.stop());

describe("bad preface", () => {
  test("an HTTP/1.1 request instead of the preface: GOAWAY PROTOCOL_ERROR and closed", async () => {
    await using client = await rawH2(server.port, { preface: false });
    client.send(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: h2.localhost\r\n\r\n"));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(server.requests).toBe(0);
  });

  test("the preface with one byte wrong, at its end", async () => {
    await using client = await rawH2(server.port, { preface: false });
    const wrong = PREFACE.slice();
    wrong[wrong.length - 1] = 0x0b;
    client.send(wrong);
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  test("a first frame other than SETTINGS: PROTOCOL_ERROR, and the request after it is not served", async () => {
    await using client = await rawH2(server.port, { preface: false });
    client.send(PREFACE, ping(), headers(1, getFields()));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(server.requests).toBe(0);
  });

  test("a preface trickled and never finished: cut after the idle timeout", async () => {
    await using client = await rawH2(server.port, { preface: false });
    client.send(PREFACE.subarray(0, 10));
    await client.untilClosed(10_000);
    expect(client.isClosed).toBe(true);
  });
});
