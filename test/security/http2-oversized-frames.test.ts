/**
 * Oversized HTTP/2 frames: a frame header claiming more than the server's
 * SETTINGS_MAX_FRAME_SIZE (16,384), so that a reader waiting for the payload
 * holds up to 16 MB per connection, and frames whose fixed sizes are wrong.
 * Against a real server on the engine: GOAWAY FRAME_SIZE_ERROR from the
 * header alone, before a byte of the payload is kept.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, frame, FrameType, getFields, headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo({ limits: { idleTimeoutMs: 120_000 } })));
afterAll(() => server.stop());

/** A frame header alone, claiming `length` bytes of payload. */
function claim(type: number, stream: number, length: number): Uint8Array {
  const h = frame(type, 0, stream);
  h[0] = length >>> 16;
  h[1] = (length >>> 8) & 0xff;
  h[2] = length & 0xff;
  return h;
}

describe("oversized frames", () => {
  for (const [what, type, stream] of [
    ["DATA", FrameType.DATA, 1],
    ["HEADERS", FrameType.HEADERS, 3],
    ["an unknown type", 0xcc, 0],
  ] as const) {
    test(`a ${what} frame claiming 16 MB: FRAME_SIZE_ERROR from its header, with none of its payload sent`, async () => {
      await using client = await rawH2(server.port);
      client.send(settingsAck(), headers(1, getFields("/hold"), false), claim(type, stream, 16_777_215));
      await client.untilClosed(10_000);
      expect(client.frames.goawayCode).toBe(ErrorCode.FRAME_SIZE_ERROR);
    });
  }

  test("one byte past the limit is refused too", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), frame(FrameType.HEADERS, 0x5, 1, new Uint8Array(16_385)));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.FRAME_SIZE_ERROR);
  });

  for (const [what, bytes] of [
    ["PING of 9 bytes", frame(FrameType.PING, 0, 0, new Uint8Array(9))],
    ["WINDOW_UPDATE of 5 bytes", frame(FrameType.WINDOW_UPDATE, 0, 0, [0, 0, 0, 0, 1])],
    ["RST_STREAM of 3 bytes", frame(FrameType.RST_STREAM, 0, 1, [0, 0, 8])],
    ["SETTINGS of 7 bytes", frame(FrameType.SETTINGS, 0, 0, new Uint8Array(7))],
  ] as const) {
    test(`${what}: FRAME_SIZE_ERROR`, async () => {
      await using client = await rawH2(server.port);
      client.send(settingsAck(), headers(1, getFields("/hold"), false), bytes);
      await client.untilClosed(10_000);
      expect(client.frames.goawayCode).toBe(ErrorCode.FRAME_SIZE_ERROR);
    });
  }
});
