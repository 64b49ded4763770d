/**
 * HTTP/2 CONTINUATION flood (the 2024 class, CVE-2024-27316 and others)
 * against the real edge: a header block for a tunnel that never ends, in
 * large or empty CONTINUATION frames. A block may hold at most
 * --h2-max-header-list bytes and 64 CONTINUATION frames: past either the
 * connection ends with GOAWAY ENHANCE_YOUR_CALM, and nothing of it reaches
 * the tunnel.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { ErrorCode, Flag, frame, FrameType, literalBlock, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

setDefaultTimeout(60_000);

const MAX_HEADER_LIST = 16 * 1024;
let t: Tunnel;
let host: string;
let served = 0;

beforeAll(async () => {
  t = await withTunnel({
    server: { args: ["--h2-max-header-list", String(MAX_HEADER_LIST)] },
    upstream: () => {
      served++;
      return new Response("ok\n");
    },
    args: ["--subdomain", "flood"],
  });
  host = `flood.localhost:${t.server.edgePort}`;
});
afterAll(() => t?.close());

/** A GET's HEADERS without END_HEADERS: its block goes on in CONTINUATION frames. */
const start = () => frame(FrameType.HEADERS, Flag.END_STREAM, 1, literalBlock([[":method", "GET"], [":scheme", "http"], [":authority", host], [":path", "/"]]));

describe("CONTINUATION flood at the edge", () => {
  test("a header block growing without end: GOAWAY ENHANCE_YOUR_CALM, nothing reaches the tunnel", async () => {
    await using client = await rawH2(t.server.edgePort);
    const fill = frame(FrameType.CONTINUATION, 0, 1, literalBlock([["x-fill", "f".repeat(4_000)]]));
    client.send(settingsAck(), start(), ...new Array(2_000).fill(fill)); // 8 MB of one header block
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(served).toBe(0);
  });

  test("a block past --h2-max-header-list in a few frames (within the default's bound): GOAWAY ENHANCE_YOUR_CALM", async () => {
    await using client = await rawH2(t.server.edgePort);
    const fill = frame(FrameType.CONTINUATION, 0, 1, literalBlock([["x-fill", "f".repeat(4_000)]]));
    client.send(settingsAck(), start(), fill, fill, fill, fill, fill);
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(served).toBe(0);
  });

  test("endless empty CONTINUATION frames: GOAWAY ENHANCE_YOUR_CALM", async () => {
    await using client = await rawH2(t.server.edgePort);
    const empty = frame(FrameType.CONTINUATION, 0, 1);
    client.send(settingsAck(), start(), ...new Array(100_000).fill(empty));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    expect(served).toBe(0);
  });

  test("a block in a few CONTINUATION frames within the bounds is a request like any other, through the tunnel", async () => {
    await using client = await rawH2(t.server.edgePort);
    const block = literalBlock([[":method", "GET"], [":scheme", "http"], [":authority", host], [":path", "/pieces"], ["x-a", "a".repeat(5_000)]]);
    client.send(
      settingsAck(),
      frame(FrameType.HEADERS, Flag.END_STREAM, 1, block.subarray(0, 2_000)),
      frame(FrameType.CONTINUATION, 0, 1, block.subarray(2_000, 4_000)),
      frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block.subarray(4_000)),
    );
    await client.until(() => client.frames.body(1) !== "", 10_000, "the answer");
    expect(client.frames.body(1)).toBe("ok\n");
    expect(served).toBe(1);
  });
});
