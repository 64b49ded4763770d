/**
 * HTTP/2 CONTINUATION flood (the 2024 class, CVE-2024-27316 and others): a
 * header block that never ends, in CONTINUATION frames sent one after
 * another (large ones, or empty ones), which a server gathering the block
 * until END_HEADERS would buffer or loop on for ever. Against a real server
 * on the engine: a block may hold at most --h2-max-header-list bytes and 64
 * CONTINUATION frames (GOAWAY ENHANCE_YOUR_CALM past either), and must be
 * whole within --h2-idle-timeout of its HEADERS.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, Flag, frame, FrameType, getFields, literalBlock, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

const MAX_HEADER_LIST = 16 * 1024;
/** A server whose idle timeout is far off (a flood is stopped by the bounds, not by time), and one whose is near. */
let server: H2EchoServer;
let hurried: H2EchoServer;
beforeAll(async () => {
  server = await startH2Echo({ limits: { maxHeaderListBytes: MAX_HEADER_LIST, idleTimeoutMs: 120_000 } });
  hurried = await startH2Echo({ limits: { idleTimeoutMs: 1_500 } });
});
afterAll(async () => {
  await server.stop();
  await hurried.stop();
});

const start = () => frame(FrameType.HEADERS, Flag.END_STREAM, 1, literalBlock(getFields()));

describe("CONTINUATION flood", () => {
  test("a header block growing without end: GOAWAY ENHANCE_YOUR_CALM once it passes the header list's bound", async () => {
    await using client = await rawH2(server.port);
    const fill = frame(FrameType.CONTINUATION, 0, 1, literalBlock([["x-fill", "f".repeat(4_000)]]));
    client.send(settingsAck(), start(), ...new Array(2_000).fill(fill)); // 8 MB of one header block
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(server.requests).toBe(0);
  });

  test("a header block of endless empty CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM", async () => {
    await using client = await rawH2(server.port);
    const empty = frame(FrameType.CONTINUATION, 0, 1);
    client.send(settingsAck(), start(), ...new Array(100_000).fill(empty));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  });

  test("a header block left unfinished: the connection ends after the idle timeout", async () => {
    await using client = await rawH2(hurried.port);
    client.send(settingsAck(), start(), frame(FrameType.CONTINUATION, 0, 1, literalBlock([["x-a", "1"]])));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
  });

  test("a block in a few CONTINUATION frames within the bounds is a request like any other", async () => {
    await using client = await rawH2(server.port);
    const block = literalBlock(getFields("/pieces", [["x-a", "a".repeat(5_000)]]));
    const parts = [0, 2_000, 4_000, block.byteLength];
    client.send(
      settingsAck(),
      frame(FrameType.HEADERS, Flag.END_STREAM, 1, block.subarray(0, 2_000)),
      frame(FrameType.CONTINUATION, 0, 1, block.subarray(parts[1], parts[2])),
      frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block.subarray(parts[2], parts[3])),
    );
    await client.until(() => client.frames.body(1) !== "", 10_000, "the answer");
    expect(client.frames.body(1)).toBe("GET /pieces\n");
  });
});
