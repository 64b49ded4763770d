/**
 * HTTP/2 flow-control windows overflowed: WINDOW_UPDATE increments or a
 * SETTINGS_INITIAL_WINDOW_SIZE that would push a window past 2^31-1 (where
 * a server's arithmetic could wrap and send without limit), and DATA past
 * a stream's window. Against a real server on the engine: the connection's
 * window past 2^31-1 is GOAWAY FLOW_CONTROL_ERROR; a stream's, or DATA
 * past a stream's window, RST_STREAM FLOW_CONTROL_ERROR. (The connection's
 * own receive window is reopened as bytes arrive, so that it never holds a
 * stream back: what bounds a client's DATA is each stream's window.)
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { H2_STREAM_WINDOW } from "../../src/http2/limits.ts";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { data, dataFrames, ErrorCode, getFields, headers, Setting, settings, settingsAck, windowUpdate } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo({ limits: { maxConcurrentStreams: 4 } })));
afterAll(() => server.stop());

describe("window overflow", () => {
  test("the connection's window past 2^31-1: GOAWAY FLOW_CONTROL_ERROR", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), windowUpdate(0, 2 ** 31 - 1));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.FLOW_CONTROL_ERROR);
  });

  test("a stream's window past 2^31-1: RST_STREAM FLOW_CONTROL_ERROR, the connection goes on", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, getFields("/hold"), false), windowUpdate(1, 2 ** 31 - 1), headers(3, getFields("/next")));
    await client.until(() => client.frames.body(3) !== "", 10_000, "the next request answered");
    expect(client.frames.resets().get(1)).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    expect(client.frames.goawayCode).toBeUndefined();
  });

  test("SETTINGS_INITIAL_WINDOW_SIZE raising an open stream's window past 2^31-1: GOAWAY FLOW_CONTROL_ERROR", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, getFields("/hold"), false), windowUpdate(1, 2 ** 31 - 65_536), settings([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31 - 1]]));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.FLOW_CONTROL_ERROR);
  });

  test("DATA past a stream's window: RST_STREAM FLOW_CONTROL_ERROR", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck(), headers(1, getFields("/hold"), false), dataFrames(1, new Uint8Array(H2_STREAM_WINDOW)), data(1, "x"));
    await client.until(() => client.frames.resets().has(1), 10_000, "the stream reset");
    expect(client.frames.resets().get(1)).toBe(ErrorCode.FLOW_CONTROL_ERROR);
  });
});
