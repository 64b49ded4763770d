/**
 * Liveness in the mux: with keepAlive() a mux pings on its schedule, a peer
 * that answers (or says anything) keeps it alive, and a silent one is dead
 * after deadAfterMs: the mux fails with KEEPALIVE_TIMEOUT and its streams
 * are reset. Short intervals here; the defaults are in wire.ts.
 */
import { describe, expect, test } from "bun:test";
import { encodeFrame, u32Payload } from "../../src/protocol/frames.ts";
import { Mux, type Stream } from "../../src/protocol/mux.ts";
import { FrameType, WireError } from "../../src/protocol/wire.ts";
import { memoryPair } from "./memory-pair.ts";
import { signal, within } from "./support.ts";

const FAST = { intervalMs: 100, deadAfterMs: 1_000 };

describe("keepalive", () => {
  test("both sides ping on their schedule, and a peer that answers stays alive past the dead-peer time", async () => {
    const pair = memoryPair();
    pair.edge.keepAlive(FAST);
    pair.agent.keepAlive(FAST);
    await Bun.sleep(FAST.deadAfterMs * 2.5);
    expect(pair.edge.closed).toBe(false);
    expect(pair.agent.closed).toBe(false);
    expect(pair.toAgent.frames(FrameType.PING).length).toBeGreaterThanOrEqual(2);
    expect(pair.toEdge.frames(FrameType.PING).length).toBeGreaterThanOrEqual(2);
    expect(pair.toEdge.frames(FrameType.PONG).length).toBeGreaterThanOrEqual(2);
    pair.edge.close();
    pair.agent.close();
  });

  test("a silent peer is dead after deadAfterMs: KEEPALIVE_TIMEOUT, an ERROR sent, and open streams reset", async () => {
    const closed = signal<{ code: string; at: number }>();
    const sentFrames: number[] = [];
    // a peer that takes everything and says nothing
    const mux = new Mux({
      role: "edge",
      send: (frame) => {
        sentFrames.push(frame[0]!);
        return "sent";
      },
      onClose: (code) => closed.resolve({ code, at: performance.now() }),
    });
    const stream: Stream = mux.open({ kind: "tcp" });
    const reset = signal<string>();
    stream.onReset = (code) => reset.resolve(code);
    const start = performance.now();
    mux.keepAlive(FAST);
    const { code, at } = await within(closed.promise, FAST.deadAfterMs * 10, "the dead peer to be found");
    expect(code).toBe(WireError.KEEPALIVE_TIMEOUT);
    expect(at - start).toBeGreaterThanOrEqual(FAST.deadAfterMs);
    expect(await within(reset.promise, 1_000, "the stream's reset")).toBe(WireError.KEEPALIVE_TIMEOUT);
    expect(sentFrames).toContain(FrameType.PING);
    expect(sentFrames.at(-1)).toBe(FrameType.ERROR);
  });

  test("any frame is a sign of life: a peer that sends data but never PONGs is alive", async () => {
    const closed = signal<string>();
    const mux = new Mux({ role: "edge", send: () => "sent", onClose: (code) => closed.resolve(code) });
    mux.keepAlive(FAST);
    const until = performance.now() + FAST.deadAfterMs * 2.5;
    // the peer's own PINGs: frames like any other, though never an answer to ours
    while (performance.now() < until && !mux.closed) {
      mux.receive(encodeFrame(FrameType.PING, 0, u32Payload(1)));
      await Bun.sleep(100);
    }
    expect(mux.closed).toBe(false);
    mux.close();
    expect(await within(closed.promise, 1_000, "the close")).toBe(WireError.GOING_AWAY);
  });

  test("a closed mux stops pinging", async () => {
    let sent = 0;
    const mux = new Mux({ role: "agent", send: () => (sent++, "sent") });
    mux.keepAlive(FAST);
    await Bun.sleep(FAST.intervalMs * 3);
    mux.close();
    const before = sent;
    await Bun.sleep(FAST.intervalMs * 5);
    expect(before).toBeGreaterThanOrEqual(1);
    expect(sent).toBe(before);
  });
});
