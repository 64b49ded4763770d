/**
 * HTTP/2 rapid reset (CVE-2023-44487) against the real edge: a visitor
 * opens streams to a tunnel and resets them at once, in a loop, so that
 * each would open a tunnel stream to the agent (and a request to the
 * service) while its concurrent streams never pass the limit. The resets a
 * client sends are counted per connection: past --h2-max-resets-per-second
 * (bursts of twice that) the connection ends with GOAWAY
 * ENHANCE_YOUR_CALM, and the tunnel streams opened stay within the burst.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { ErrorCode, headers, rstStream, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { run } from "../harness/nghttp2.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

setDefaultTimeout(60_000);

const RESETS_PER_SECOND = 20;
const METRICS_TOKEN = "rapid-reset-edge-metrics-token-0123";
let t: Tunnel;
let host: string;
let served = 0;

beforeAll(async () => {
  t = await withTunnel({
    server: { args: ["--h2-max-resets-per-second", String(RESETS_PER_SECOND), "--metrics-token", METRICS_TOKEN] },
    upstream: () => {
      served++;
      return new Response("ok\n");
    },
    args: ["--subdomain", "reset"],
  });
  host = `reset.localhost:${t.server.edgePort}`;
});
afterAll(() => t?.close());

const fieldsOf = (path: string): [string, string][] => [[":method", "POST"], [":scheme", "http"], [":authority", host], [":path", path]];
/** Tunnel streams the edge reset (one per h2 stream handed on and then reset by its client). */
const edgeResets = async () => sample(await scrape(t.server.adminUrl, { authorization: `Bearer ${METRICS_TOKEN}` }), 'burrow_streams_reset_total{by="edge",code="CANCELLED"}');

describe("rapid reset (CVE-2023-44487) at the edge", () => {
  test("streams to a tunnel opened and reset in a loop: GOAWAY ENHANCE_YOUR_CALM, and the tunnel streams opened stay within the burst", async () => {
    const before = await edgeResets();
    const servedBefore = served;
    await using client = await rawH2(t.server.edgePort);
    const loop: Uint8Array[] = [settingsAck()];
    for (let i = 0; i < 5_000; i++) loop.push(headers(2 * i + 1, fieldsOf(`/r${i}`), false), rstStream(2 * i + 1, ErrorCode.CANCEL));
    client.send(Buffer.concat(loop));
    await client.untilClosed(10_000);
    expect(client.frames.goawayCode).toBe(ErrorCode.ENHANCE_YOUR_CALM);
    // --h2-max-resets-per-second's burst (twice the rate), not the five thousand the client asked for
    expect((await edgeResets()) - before).toBeLessThanOrEqual(2 * RESETS_PER_SECOND + 1);
    expect(served - servedBefore).toBeLessThanOrEqual(2 * RESETS_PER_SECOND + 1);
  });

  test("the edge and the tunnel serve on afterwards", async () => {
    const r = await run(["curl", "-sS", "--http2-prior-knowledge", "--resolve", `${host}:127.0.0.1`, "-w", "%{http_version}", `http://${host}/after`]);
    expect(r.stdout).toBe("ok\n2");
  });
});
