/**
 * HTTP/2 rapid reset (CVE-2023-44487): a client opens streams and resets
 * them at once, in a loop, so that the server starts work for each request
 * (here: hands it to the edge, which would open a tunnel stream) while the
 * client's concurrent streams never pass the limit. Against a real server on
 * the engine: the resets a client sends (or makes the server send) are
 * counted, and past --h2-max-resets-per-second (bursts of twice that) the
 * connection ends with GOAWAY ENHANCE_YOUR_CALM.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { DEFAULT_H2_LIMITS } from "../../src/http2/limits.ts";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, getFields, headers, rstStream, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

// a test may wait out its 10 s liveness bound before it fails
setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo()));
afterAll(() => server.stop());

describe("rapid reset (CVE-2023-44487)", () => {
  test("streams opened and reset in a loop: GOAWAY ENHANCE_YOUR_CALM, and the requests handed on stay bounded", async () => {
    await using client = await rawH2(server.port);
    const before = server.requests;
    const loop: Uint8Array[] = [settingsAck()];
    for (let i = 0; i < 5_000; i++) loop.push(headers(2 * i + 1, getFields("/hold"), false), rstStream(2 * i + 1, ErrorCode.CANCEL));
    client.send(Buffer.concat(loop));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    // the burst allowance (twice the rate), not the five thousand the client asked for
    expect(server.requests - before).toBeLessThanOrEqual(2 * DEFAULT_H2_LIMITS.maxResetsPerSecond + 1);
  });

  test("requests the server must refuse count too: malformed ones in a loop end the same way", async () => {
    await using client = await rawH2(server.port);
    const loop: Uint8Array[] = [settingsAck()];
    for (let i = 0; i < 5_000; i++) loop.push(headers(2 * i + 1, getFields("/", [["connection", "close"]])));
    client.send(Buffer.concat(loop));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  });

  test("a browser's burst of cancels (a page left with its requests in flight) is within the allowance", async () => {
    await using client = await rawH2(server.port);
    const burst: Uint8Array[] = [settingsAck()];
    for (let i = 0; i < 60; i++) burst.push(headers(2 * i + 1, getFields("/hold"), false), rstStream(2 * i + 1, ErrorCode.CANCEL));
    burst.push(headers(121, getFields("/after")));
    client.send(Buffer.concat(burst));
    await client.until(() => client.frames.body(121) !== "", 10_000, "the request after the cancels answered");
    expect(client.frames.body(121)).toBe("GET /after\n");
    expect(client.frames.goawayCode).toBeUndefined();
  });
});
