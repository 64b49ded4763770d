/**
 * HPACK bomb: a small header block that decodes to a huge header list (one
 * large value put in the dynamic table, then named by one byte thousands of
 * times), so that a server bounding the list only after decoding it has
 * already spent the memory. Against a real server on the engine: the list
 * is bounded while it decodes (--h2-max-header-list): past it no field is
 * made, the stream is answered 431 and the request never reaches the
 * handler; the connection, its HPACK table in step, serves the next one.
 * A block that does not decode ends the connection (COMPRESSION_ERROR).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, Flag, frame, FrameType, getFields, headers, literalBlock, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo()));
afterAll(() => server.stop());

/** GET's fields, then a 4,000-byte value added to the table and named `references` times: a 16 KiB frame that decodes to ~32 MB. */
function bombBlock(references: number): Uint8Array {
  const value = Buffer.from("v".repeat(4_000));
  const add = [0x40, 0x01, 0x78, 0x7f, (3_873 % 128) | 0x80, Math.floor(3_873 / 128), ...value];
  return new Uint8Array([...literalBlock(getFields("/bomb")), ...add, ...new Array(references).fill(0xbe)]);
}

describe("HPACK bomb", () => {
  test("a block decoding to ~32 MB: 431 before any of it is made, the handler never sees it, the next request is served", async () => {
    await using client = await rawH2(server.port);
    const before = server.requests;
    const heapBefore = process.memoryUsage().heapUsed;
    client.send(settingsAck(), frame(FrameType.HEADERS, Flag.END_STREAM | Flag.END_HEADERS, 1, bombBlock(8_000)));
    await client.until(() => client.frames.status(1) !== undefined, 10_000, "an answer to the bomb");
    expect(client.frames.status(1)).toBe("431");
    expect(server.requests).toBe(before);
    // the table was kept in step: the next block names the bomb's entry, and decodes
    client.send(headers(3, new Uint8Array([...literalBlock(getFields("/next")), 0xbe])));
    await client.until(() => client.frames.body(3) !== "", 10_000, "the next request answered");
    expect(client.frames.body(3)).toBe("GET /next\n");
    expect(client.frames.goawayCode).toBeUndefined();
    // nothing near the decoded size was held (32 MB of strings would show)
    expect(process.memoryUsage().heapUsed - heapBefore).toBeLessThan(16 * 1024 * 1024);
  });

  test("a header block that does not decode: GOAWAY COMPRESSION_ERROR", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, new Uint8Array([0x82, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x0f])));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.COMPRESSION_ERROR);
  });
});
