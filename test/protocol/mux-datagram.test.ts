/**
 * DATAGRAM frames: datagrams carried whole (never split or merged, over a
 * message transport and over a byte stream cut at random places), in order,
 * outside a stream's credit; dropped by the sender when its connection is
 * congested instead of queued, while the stream's bytes are queued and lost
 * never; refused past MAX_DATAGRAM, after FIN, on stream 0 and with a FIN.
 */
import { describe, expect, test } from "bun:test";
import { decodeFrame, encodeFrame } from "../../src/protocol/frames.ts";
import { Mux, type Stream } from "../../src/protocol/mux.ts";
import { FLAG_FIN, FrameType, HEADER_LENGTH, INITIAL_WINDOW, MAX_DATAGRAM, WireError } from "../../src/protocol/wire.ts";
import { memoryPair } from "./memory-pair.ts";
import { prng } from "./support.ts";

const SIZES = [1, 1472, 9000, MAX_DATAGRAM];

/** A datagram whose bytes say which one it is and how long: any split, merge or mix-up shows. */
function datagram(n: number, size: number): Uint8Array {
  const d = new Uint8Array(size);
  for (let i = 0; i < size; i++) d[i] = (n * 31 + i) & 0xff;
  return d;
}

/** A pair with one stream opened by the edge, whose datagrams at the agent are recorded. */
async function pairWithStream(opts: Parameters<typeof memoryPair>[0] = {}) {
  const received: Uint8Array[] = [];
  const accepted = Promise.withResolvers<Stream>();
  const pair = memoryPair({
    ...opts,
    agent: {
      onStream: (s) => {
        s.onDatagram = (d) => void received.push(d.slice());
        accepted.resolve(s);
      },
    },
  });
  const stream = pair.edge.open({ tunnel: "t", kind: "udp", remote: "1.2.3.4:5" });
  await pair.settle();
  return { pair, stream, atAgent: await accepted.promise, received };
}

describe("datagrams arrive whole and in order", () => {
  for (const cutReads of [undefined, { seed: 7, max: 97 }, { seed: 11, max: 3000 }]) {
    test(`sizes ${SIZES.join(", ")}, 40 of them, ${cutReads ? `over a byte stream cut into reads of at most ${cutReads.max} bytes` : "over a message transport"}`, async () => {
      const { pair, stream, received } = await pairWithStream(cutReads ? { cutReads } : {});
      const sent: Uint8Array[] = [];
      for (let n = 0; n < 40; n++) {
        const d = datagram(n, SIZES[n % SIZES.length]!);
        expect(stream.sendDatagram(d)).toBe(true);
        sent.push(d);
        if (n % 7 === 6) await pair.settle();
      }
      await pair.settle();
      expect(received.length).toBe(sent.length);
      for (let n = 0; n < sent.length; n++) expect(Buffer.from(received[n]!).equals(Buffer.from(sent[n]!))).toBe(true);
      expect(stream.datagramsSent).toBe(40);
      expect(stream.datagramsDropped).toBe(0);
    });
  }

  test("both ways, mixed with the stream's bytes, neither disturbing the other", async () => {
    const { pair, stream, atAgent, received } = await pairWithStream({ cutReads: { seed: 3, max: 500 } });
    const back: Uint8Array[] = [];
    stream.onDatagram = (d) => void back.push(d.slice());
    const bytes: Uint8Array[] = [];
    atAgent.onData = (c) => {
      bytes.push(c.slice());
      atAgent.consumed(c.byteLength);
    };
    const rand = prng(5);
    const text = Buffer.alloc(200_000, "abc");
    for (let n = 0; n < 20; n++) {
      stream.sendDatagram(datagram(n, 1 + (rand() % 3000)));
      atAgent.sendDatagram(datagram(100 + n, 1 + (rand() % 3000)));
      stream.write(text.subarray(n * 10_000, (n + 1) * 10_000));
    }
    await pair.settle();
    expect(received).toHaveLength(20);
    expect(back).toHaveLength(20);
    expect(Buffer.concat(bytes).equals(text)).toBe(true);
  });
});

describe("outside credit, and dropped rather than queued", () => {
  test("10 MiB of datagrams take none of the stream's credit", async () => {
    const { pair, stream, received } = await pairWithStream();
    for (let n = 0; n < 160; n++) {
      stream.sendDatagram(datagram(n, MAX_DATAGRAM));
      if (n % 10 === 9) await pair.settle();
    }
    await pair.settle();
    expect(received).toHaveLength(160);
    expect(stream.sendWindow).toBe(INITIAL_WINDOW);
  });

  test("a congested connection drops datagrams (counted) and queues the stream's bytes, which all arrive once it drains", async () => {
    const { pair, stream, atAgent, received } = await pairWithStream({ backpressureAt: 32 * 1024 });
    const bytes: Uint8Array[] = [];
    atAgent.onData = (c) => {
      bytes.push(c.slice());
      atAgent.consumed(c.byteLength);
    };
    // enough bytes in one turn to make the transport push back
    const text = Buffer.alloc(400_000, "x");
    stream.write(text);
    let dropped = 0;
    for (let n = 0; n < 50; n++) if (!stream.sendDatagram(datagram(n, 1000))) dropped++;
    expect(dropped).toBeGreaterThan(0);
    expect(stream.datagramsDropped).toBe(dropped);
    await pair.settle();
    expect(Buffer.concat(bytes).equals(text)).toBe(true);
    expect(received.length).toBe(50 - dropped);
    // drained: datagrams go again
    expect(stream.sendDatagram(datagram(99, 10))).toBe(true);
    await pair.settle();
    expect(received.at(-1)!.byteLength).toBe(10);
  });

  test("a datagram over MAX_DATAGRAM is not sent; after this side's end none is", async () => {
    const { pair, stream, received } = await pairWithStream();
    expect(stream.sendDatagram(new Uint8Array(MAX_DATAGRAM + 1))).toBe(false);
    stream.end();
    expect(stream.sendDatagram(new Uint8Array(10))).toBe(false);
    expect(stream.datagramsDropped).toBe(2);
    await pair.settle();
    expect(received).toHaveLength(0);
  });

  test("a datagram nobody takes (no handler) is dropped: nothing is kept for later", async () => {
    const accepted = Promise.withResolvers<Stream>();
    const pair = memoryPair({ agent: { onStream: (s) => accepted.resolve(s) } });
    const stream = pair.edge.open({ tunnel: "t", kind: "udp", remote: "1.2.3.4:5" });
    for (let n = 0; n < 100; n++) stream.sendDatagram(datagram(n, 1000));
    await pair.settle();
    const s = await accepted.promise;
    const later: Uint8Array[] = [];
    s.onDatagram = (d) => void later.push(d);
    await pair.settle();
    expect(later).toHaveLength(0);
    expect(s.datagramsReceived).toBe(100);
  });
});

describe("what a peer may not send", () => {
  /** A mux fed one message by hand; resolves with the code it closed with (undefined if it did not). */
  function feed(build: (open: Uint8Array) => Uint8Array[]): string | undefined {
    let closed: string | undefined;
    const mux = new Mux({ role: "agent", send: () => "sent", onStream: () => {}, onClose: (code) => (closed = code) });
    const open = encodeFrame(FrameType.OPEN, 2, new TextEncoder().encode(JSON.stringify({ tunnel: "t", kind: "udp", remote: "1.2.3.4:5" })));
    for (const m of build(open)) mux.receive(m);
    return closed;
  }

  test("a datagram over MAX_DATAGRAM is a protocol error; one of exactly MAX_DATAGRAM is not", () => {
    expect(feed((open) => [open, encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(MAX_DATAGRAM))])).toBeUndefined();
    expect(feed((open) => [open, encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(MAX_DATAGRAM + 1))])).toBe(WireError.PROTOCOL_ERROR);
  });

  test("after the peer's FIN, on stream 0, with FIN, or for a stream never opened: a protocol error", () => {
    expect(feed((open) => [open, encodeFrame(FrameType.FIN, 2), encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(1))])).toBe(WireError.PROTOCOL_ERROR);
    expect(feed((open) => [open, encodeFrame(FrameType.DATAGRAM, 0, new Uint8Array(1))])).toBe(WireError.PROTOCOL_ERROR);
    const withFin = encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(1));
    withFin[0] = FrameType.DATAGRAM | FLAG_FIN;
    expect(feed((open) => [open, withFin])).toBe(WireError.PROTOCOL_ERROR);
    expect(feed(() => [encodeFrame(FrameType.DATAGRAM, 4, new Uint8Array(1))])).toBe(WireError.PROTOCOL_ERROR);
  });

  test("the frame's layout: type 0x16, the stream, the datagram as it is", () => {
    const m = encodeFrame(FrameType.DATAGRAM, 6, new Uint8Array([1, 2, 3]));
    expect([...m.subarray(0, HEADER_LENGTH)]).toEqual([0x16, 0, 0, 0, 6, 0, 0, 0, 3]);
    expect(decodeFrame(m)).toMatchObject({ type: FrameType.DATAGRAM, stream: 6, fin: false });
  });
});

describe("a handler that throws", () => {
  for (const cutReads of [undefined, { seed: 3, max: 200 }]) {
    test(`ends the connection (GOING_AWAY) instead of throwing out of receive and losing the frames after it, ${cutReads ? "over a byte stream" : "over messages"}`, async () => {
      const closed: string[] = [];
      const pair = memoryPair({
        ...(cutReads ? { cutReads } : {}),
        agent: {
          onStream: (s) => {
            let n = 0;
            s.onDatagram = () => {
              if (++n === 3) throw new Error("ECONNREFUSED: connection refused, send");
            };
          },
          onClose: (code) => closed.push(code),
        },
      });
      const stream = pair.edge.open({ tunnel: "t", kind: "udp", remote: "1.2.3.4:5" });
      await pair.settle();
      for (let n = 0; n < 10; n++) stream.sendDatagram(datagram(n, 100));
      await pair.settle();
      expect(closed).toEqual([WireError.GOING_AWAY]);
      expect(pair.agent.closed).toBe(true);
    });
  }
});
