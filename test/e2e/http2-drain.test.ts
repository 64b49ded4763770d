/**
 * A server stopping (SIGTERM) with HTTP/2 visitors: an h2 connection is
 * told GOAWAY (no new stream) and its streams in flight are answered
 * before it closes, within --drain-timeout, as an HTTP/1.1 request in
 * flight is; an idle h2 connection does not hold the stop up.
 */
import { expect, setDefaultTimeout, test } from "bun:test";
import { ErrorCode, FrameType, headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { withTunnel } from "../harness/tunnel.ts";

setDefaultTimeout(60_000);

test("SIGTERM: GOAWAY to h2 connections, the stream in flight answered, the idle one closed, the server gone well before the drain timeout", async () => {
  const { promise: asked, resolve: requestArrived } = Promise.withResolvers<void>();
  await using t = await withTunnel({
    server: { args: ["--drain-timeout", "20"] },
    upstream: async (req) => {
      requestArrived();
      await Bun.sleep(1_000);
      return new Response(`answered ${new URL(req.url).pathname}`);
    },
    args: ["--subdomain", "draining"],
  });
  const host = `draining.localhost:${t.server.edgePort}`;
  await using busy = await rawH2(t.server.edgePort);
  await using idle = await rawH2(t.server.edgePort);
  busy.send(settingsAck(), headers(1, [[":method", "GET"], [":scheme", "http"], [":authority", host], [":path", "/in-flight"]]));
  idle.send(settingsAck());
  await asked;
  const started = performance.now();
  const stopped = t.server.stop();
  await busy.until(() => busy.frames.of(FrameType.GOAWAY).length > 0, 10_000, "GOAWAY on the busy connection");
  expect(busy.frames.goawayCode).toBe(ErrorCode.NO_ERROR);
  await busy.untilClosed(10_000);
  expect(busy.frames.status(1)).toBe("200");
  expect(busy.frames.body(1)).toBe("answered /in-flight");
  await idle.untilClosed(10_000);
  expect(idle.frames.goawayCode).toBe(ErrorCode.NO_ERROR);
  await stopped;
  expect(performance.now() - started).toBeLessThan(10_000);
});
