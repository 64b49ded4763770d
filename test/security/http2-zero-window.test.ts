/**
 * HTTP/2 zero-window stalls (CVE-2019-9517's kin, the slow read): a client
 * that asks for responses and never opens its windows (SETTINGS_INITIAL_
 * WINDOW_SIZE 0, or a connection window left spent), so that the server's
 * response bytes, and the streams behind them, wait for ever. Against a
 * real server on the engine: a stream whose bytes wait on a shut window for
 * --h2-idle-timeout is reset (CANCEL, its handler told, its bytes dropped),
 * and what one connection holds queued for its streams is bounded
 * (--h2-max-queued-response: a stream writing past it is reset).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { ErrorCode, getFields, headers, Setting, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

const QUEUE_BOUND = 1024 * 1024;
let server: H2EchoServer;
beforeAll(async () => void (server = await startH2Echo({ limits: { idleTimeoutMs: 1_500, maxQueuedResponseBytes: QUEUE_BOUND } })));
afterAll(() => server.stop());

const queued = () => [...server.connections].reduce((sum, c) => sum + c.sender.queuedBytes, 0);

describe("zero-window stalls", () => {
  test("stream windows kept shut (SETTINGS_INITIAL_WINDOW_SIZE 0): the stream is reset after the idle timeout and its bytes dropped", async () => {
    await using client = await rawH2(server.port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    const resetsBefore = server.resets.length;
    client.send(settingsAck(), headers(1, getFields("/bytes/100000")));
    await client.until(() => client.frames.status(1) === "200", 10_000, "the response head");
    expect(client.frames.body(1)).toBe("");
    expect(queued()).toBe(100_000);
    await client.until(() => client.frames.resets().has(1), 10_000, "the stalled stream reset");
    expect(client.frames.resets().get(1)).toBe(ErrorCode.CANCEL);
    expect(server.resets.slice(resetsBefore)).toEqual(["CANCEL"]);
    expect(queued()).toBe(0);
  });

  test("the connection's window left spent: the streams waiting on it are reset after the idle timeout", async () => {
    await using client = await rawH2(server.port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 1 << 20]] });
    client.send(settingsAck(), headers(1, getFields("/bytes/200000")));
    await client.until(() => client.frames.body(1).length === 65_535, 10_000, "the connection's first window of bytes");
    await client.until(() => client.frames.resets().has(1), 10_000, "the stalled stream reset");
    expect(client.frames.resets().get(1)).toBe(ErrorCode.CANCEL);
  });

  test("responses queued for shut windows are bounded per connection: the stream writing past the bound is reset", async () => {
    await using client = await rawH2(server.port, { settings: [[Setting.INITIAL_WINDOW_SIZE, 0]] });
    client.send(settingsAck(), headers(1, getFields("/bytes/600000")), headers(3, getFields("/bytes/600000")), headers(5, getFields("/bytes/100")));
    await client.until(() => client.frames.resets().has(3), 10_000, "the stream past the bound reset");
    expect(client.frames.resets().get(3)).toBe(ErrorCode.INTERNAL_ERROR);
    expect(client.frames.resets().has(1)).toBe(false);
    expect(queued()).toBeLessThanOrEqual(QUEUE_BOUND);
  });
});
