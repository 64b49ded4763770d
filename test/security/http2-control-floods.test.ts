/**
 * HTTP/2 control frame floods (CVE-2019-9512 ping, -9515 settings, -9518
 * empty frames, and their kin): frames that ask the server for work, or for
 * an answer, and carry no request: SETTINGS, PING, PRIORITY, WINDOW_UPDATE
 * that no DATA called for, empty DATA and frames of unknown types. Against
 * a real server on the engine: past --h2-max-control-frames a second
 * (bursts of twice that) the connection ends with GOAWAY ENHANCE_YOUR_CALM;
 * and a client that floods without reading the answers is cut once 64 KiB
 * of them wait for it, whatever the budget.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { data, ErrorCode, frame, FrameType, getFields, headers, ping, settings, settingsAck, windowUpdate } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";

setDefaultTimeout(30_000);

let server: H2EchoServer;
/** A server that allows any number of control frames: only the bound on answers waiting for a client that does not read stands. */
let lenient: H2EchoServer;
beforeAll(async () => {
  server = await startH2Echo({ limits: { idleTimeoutMs: 120_000 } });
  lenient = await startH2Echo({ limits: { maxControlFramesPerSecond: 1e9, idleTimeoutMs: 120_000 } });
});
afterAll(async () => {
  await server.stop();
  await lenient.stop();
});

const floods: [string, () => Uint8Array[]][] = [
  ["SETTINGS", () => [settings([[4, 65_535]])]],
  ["PING", () => [ping()]],
  ["PRIORITY", () => [frame(FrameType.PRIORITY, 0, 3, [0, 0, 0, 0, 16])]],
  ["WINDOW_UPDATE no DATA called for", () => [windowUpdate(0, 1)]],
  ["empty DATA", () => [data(1, "")]],
  ["frames of an unknown type", () => [frame(0xee, 0, 0, [1])]],
];

describe("control frame floods", () => {
  for (const [what, one] of floods) {
    test(`${what}: GOAWAY ENHANCE_YOUR_CALM`, async () => {
      await using client = await rawH2(server.port);
      const flood = one();
      const bytes = Buffer.concat([settingsAck(), headers(1, getFields("/hold"), false), ...new Array(20_000).fill(flood).flat()]);
      client.send(bytes);
      await client.untilClosed(10_000);
      expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    });
  }

  test("a client at an ordinary pace (a PING and a SETTINGS now and then) is never counted out", async () => {
    await using client = await rawH2(server.port);
    client.send(settingsAck());
    for (let i = 0; i < 50; i++) client.send(ping(), settings());
    client.send(headers(1, getFields("/still")));
    await client.until(() => client.frames.body(1) !== "", 10_000, "the request answered");
    expect(client.frames.goawayCode).toBeUndefined();
  });

  test("PINGs from a client that never reads the answers: cut once the answers waiting pass the bound, memory bounded", async () => {
    await using client = await rawH2(lenient.port);
    client.stopReading();
    const batch = Buffer.concat(new Array(10_000).fill(ping()));
    // the kernel's buffers take a few MB of answers before the server's own queue grows: send until it cuts
    for (let i = 0; i < 400 && !client.isClosed; i++) {
      client.send(batch);
      await Bun.sleep(5);
    }
    // the server reads what the client queued at its own pace, and cuts
    await client.until(() => lenient.connections.size === 0, 40_000, "the server to cut the connection");
    // a paused socket is told of no close: reading again, the client finds the connection gone
    client.resumeReading();
    await client.untilClosed(40_000);
  }, 60_000);
});
