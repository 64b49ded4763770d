/**
 * More concurrent streams than the server advertised: a client that opens
 * streams past SETTINGS_MAX_CONCURRENT_STREAMS to get more work going at
 * once than the server agreed to. Against a real server on the engine: a
 * stream past --h2-max-concurrent-streams is refused (RST_STREAM
 * REFUSED_STREAM, never handed on), and one is accepted again when another
 * closes.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, getFields, headers, rstStream, Setting, settingsAck, u32At } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

const MAX = 10;
let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo({ limits: { maxConcurrentStreams: MAX } })));
afterAll(() => server.stop());

describe("more concurrent streams than advertised", () => {
  test(`the server advertises ${MAX}; the ${MAX + 1}th stream open at once is refused, and a new one is taken once one closes`, async () => {
    await using client = await rawH2(server.port);
    await client.until(() => client.frames.frames.length > 0, 10_000, "the server's SETTINGS");
    const own = client.frames.frames[0]!.payload;
    const advertised = new Map<number, number>();
    for (let at = 0; at < own.byteLength; at += 6) advertised.set((own[at]! << 8) | own[at + 1]!, u32At(own, at + 2));
    expect(advertised.get(Setting.MAX_CONCURRENT_STREAMS)).toBe(MAX);

    const before = server.requests;
    const open = Array.from({ length: MAX + 1 }, (_, i) => headers(2 * i + 1, getFields("/hold"), false));
    client.send(settingsAck(), ...open);
    const extra = 2 * MAX + 1;
    await client.until(() => client.frames.resets().has(extra), 10_000, "the extra stream refused");
    expect(client.frames.resets().get(extra)).toBe(ErrorCode.REFUSED_STREAM);
    expect(server.requests - before).toBe(MAX);

    client.send(rstStream(1, ErrorCode.CANCEL), headers(extra + 2, getFields("/after")));
    await client.until(() => client.frames.body(extra + 2) !== "", 10_000, "a stream accepted again");
    expect(client.frames.body(extra + 2)).toBe("GET /after\n");
  });
});
