import { describe, expect, test } from "bun:test";
import { encodeFrame, jsonPayload, textPayload, u32Payload } from "../../src/protocol/frames.ts";
import { Mux, type SendResult, type Stream } from "../../src/protocol/mux.ts";
import { collect, pipeInto, readableFrom } from "../../src/protocol/pipes.ts";
import { BATCH_BYTES, CONTROL_FRAMES, DIRECT_DATA_PAYLOAD, FrameType, HEADER_LENGTH, MAX_PAYLOAD, PING_BYTES, WireError, type FrameTypeValue } from "../../src/protocol/wire.ts";
import { agentHandlers, newStalled, readAll, runCoreScenario, writeAll } from "./core-scenario.ts";
import { memoryPair } from "./memory-pair.ts";
import { between, bytes, concat, prng, randomBytes, sha256, signal, text, within } from "./support.ts";

const TINY = 1024;
const WAIT_MS = 5_000;

describe("streams over an in-memory pair", () => {
  test("the edge opens, the agent replies, and data and FIN flow both ways", async () => {
    const accepted = signal<Stream>();
    const pair = memoryPair({ agent: { onStream: (s) => accepted.resolve(s) } });
    const edgeStream = pair.edge.open({ tunnel: "t1", kind: "http" });
    expect(edgeStream.id % 2).toBe(0);

    const agentStream = await within(accepted.promise, WAIT_MS, "OPEN");
    expect(agentStream.id).toBe(edgeStream.id);
    expect(agentStream.meta).toEqual({ tunnel: "t1", kind: "http" });

    const reply = signal<unknown>();
    edgeStream.onReply = (meta) => reply.resolve(meta);
    agentStream.reply({ status: 201 });
    expect(await within(reply.promise, WAIT_MS, "REPLY")).toEqual({ status: 201 });

    const up = readAll(agentStream);
    const down = readAll(edgeStream);
    expect(edgeStream.write(bytes("ping from the edge"))).toBe(true);
    edgeStream.end();
    expect(text(await within(up, WAIT_MS, "the edge's bytes and FIN"))).toBe("ping from the edge");
    // the agent's direction is still open after the edge's FIN
    expect(agentStream.isClosed).toBe(false);
    agentStream.write(bytes("pong from the agent"));
    agentStream.end();
    expect(text(await within(down, WAIT_MS, "the agent's bytes and FIN"))).toBe("pong from the agent");

    expect(edgeStream.isClosed).toBe(true);
    expect(agentStream.isClosed).toBe(true);
    expect(pair.edge.streamCount).toBe(0);
    expect(pair.agent.streamCount).toBe(0);
    await pair.settle();
    expect(pair.toAgent.frames(FrameType.FIN).length).toBe(1);
    expect(pair.toEdge.frames(FrameType.FIN).length).toBe(1);
  });

  test("the agent opens odd streams, the edge even ones, and both work at once", async () => {
    const atEdge: Stream[] = [];
    const atAgent: Stream[] = [];
    const pair = memoryPair({ edge: { onStream: (s) => atEdge.push(s) }, agent: { onStream: (s) => atAgent.push(s) } });
    const fromEdge = [pair.edge.open({ n: 1 }), pair.edge.open({ n: 2 })];
    const fromAgent = [pair.agent.open({ n: 3 }), pair.agent.open({ n: 4 })];
    expect(fromEdge.map((s) => s.id)).toEqual([2, 4]);
    expect(fromAgent.map((s) => s.id)).toEqual([1, 3]);
    await pair.settle();
    expect(atAgent.map((s) => [s.id, s.meta])).toEqual([[2, { n: 1 }], [4, { n: 2 }]]);
    expect(atEdge.map((s) => [s.id, s.meta])).toEqual([[1, { n: 3 }], [3, { n: 4 }]]);

    const results = [...atAgent, ...atEdge].map((s) => readAll(s));
    for (const s of [...fromEdge, ...fromAgent]) {
      s.write(bytes(`stream ${s.id}`));
      s.end();
    }
    expect((await within(Promise.all(results), WAIT_MS, "all four streams")).map(text)).toEqual([
      "stream 2",
      "stream 4",
      "stream 1",
      "stream 3",
    ]);
  });

  test("the core scenario (a stalled stream beside a 1 MiB transfer, an upload and echoes) runs with a tiny window", async () => {
    const stalled = newStalled();
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: agentHandlers(stalled) } });
    await runCoreScenario(pair.edge, pair.agent, stalled, {
      initialWindow: TINY,
      bigSize: 1024 * 1024,
      upSize: 256 * 1024,
      echoStreams: 5,
      echoSize: 20_000,
      timeoutMs: 10_000,
    });
    await pair.settle();
    expect(pair.closes).toEqual({ edge: [], agent: [] });
  }, 15_000);

  test("the core scenario also runs with microtask delivery and the default window", async () => {
    const stalled = newStalled();
    const pair = memoryPair({ delivery: "microtask", agent: { onStream: agentHandlers(stalled) } });
    await runCoreScenario(pair.edge, pair.agent, stalled, {
      initialWindow: pair.edge.initialWindow,
      bigSize: 3 * 1024 * 1024,
      upSize: 1024 * 1024,
      echoStreams: 5,
      echoSize: 100_000,
      timeoutMs: 10_000,
    });
  }, 15_000);

  test("the core scenario runs over a byte stream cut into reads of any size, DATA frames passed on in pieces (the direct port)", async () => {
    for (const [seed, max, initialWindow] of [
      [7, 700, TINY],
      [8, 150_000, undefined],
    ] as const) {
      const stalled = newStalled();
      const received: Promise<Uint8Array>[] = [];
      const serve = agentHandlers(stalled);
      const onStream = (s: Stream) => ((s.meta as { kind?: string }).kind === "last" ? void received.push(readAll(s)) : serve(s));
      const pair = memoryPair({ initialWindow, cutReads: { seed, max }, agent: { onStream } });
      await runCoreScenario(pair.edge, pair.agent, stalled, {
        initialWindow: pair.edge.initialWindow,
        bigSize: 2 * 1024 * 1024,
        upSize: 512 * 1024,
        echoStreams: 5,
        echoSize: 100_000,
        timeoutMs: 10_000,
      });
      // ended while its bytes still wait for credit: the last DATA frame carries the FIN, cut by reads like the rest
      const data = randomBytes(seed, 3 * pair.edge.initialWindow + 1000);
      const last = pair.edge.open({ kind: "last" });
      last.write(data);
      last.end();
      await pair.settle();
      expect(pair.toAgent.frames(FrameType.DATA).filter((f) => f.stream === last.id && f.fin)).toHaveLength(1);
      expect(sha256(await within(received[0]!, WAIT_MS, "the last stream"))).toBe(sha256(data));
      expect(pair.closes).toEqual({ edge: [], agent: [] });
    }
  }, 20_000);

  test("200 streams written in interleaved random pieces each arrive intact and in order", async () => {
    const rand = prng(42);
    const received = new Map<number, Promise<Uint8Array>>();
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: (s) => received.set(s.id, readAll(s)) } });
    const streams = Array.from({ length: 200 }, (_, i) => ({
      stream: pair.edge.open({ i }),
      data: randomBytes(1000 + i, between(rand, 0, 6000)),
      at: 0,
    }));
    // round-robin over the streams, a random-sized piece each, waiting for drain where asked
    let live = streams.slice();
    while (live.length > 0) {
      const waits: Promise<boolean>[] = [];
      for (const s of live) {
        const n = between(rand, 1, 700);
        const piece = s.data.subarray(s.at, s.at + n);
        s.at += piece.byteLength;
        if (piece.byteLength > 0 && !s.stream.write(piece)) waits.push(s.stream.whenDrained());
        if (s.at >= s.data.byteLength) s.stream.end();
      }
      expect(await within(Promise.all(waits), WAIT_MS, "the streams to drain")).not.toContain(false);
      live = live.filter((s) => s.at < s.data.byteLength);
    }
    await pair.settle();
    expect(received.size).toBe(200);
    for (const s of streams) {
      const got = await within(received.get(s.stream.id)!, WAIT_MS, `stream ${s.stream.id}`);
      expect(got.byteLength).toBe(s.data.byteLength);
      expect(sha256(got)).toBe(sha256(s.data));
    }
    // and they really were interleaved on the wire
    const order = pair.toAgent.frames(FrameType.DATA).map((f) => f.stream);
    const switches = order.filter((id, i) => i > 0 && id !== order[i - 1]).length;
    expect(switches).toBeGreaterThan(1000);
  });
});

describe("credit windows", () => {
  test("a sender whose receiver never consumes sends exactly the window, then resumes only after consumed()", async () => {
    let agentStream: Stream | undefined;
    const received: Uint8Array[] = [];
    const pair = memoryPair({
      initialWindow: TINY,
      agent: {
        onStream: (s) => {
          agentStream = s;
          s.onData = (chunk) => received.push(chunk.slice());
        },
      },
    });
    const stream = pair.edge.open({});
    const drains: number[] = [];
    stream.onDrain = () => drains.push(stream.bytesSent);
    const data = randomBytes(7, 4 * TINY);

    expect(stream.write(data)).toBe(false);
    await pair.settle();
    expect(pair.toAgent.dataBytes(stream.id)).toBe(TINY);
    expect(stream.bytesSent).toBe(TINY);
    expect(concat(received).byteLength).toBe(TINY);
    expect(pair.toEdge.frames(FrameType.WINDOW)).toEqual([]);

    // more writes while out of credit queue up and send nothing
    const more = randomBytes(8, 100);
    expect(stream.write(more)).toBe(false);
    await pair.settle();
    expect(pair.toAgent.dataBytes(stream.id)).toBe(TINY);

    // credit comes back in batches of half a window, not byte by byte
    agentStream!.consumed(TINY / 2 - 1);
    await pair.settle();
    expect(pair.toEdge.frames(FrameType.WINDOW)).toEqual([]);
    expect(pair.toAgent.dataBytes(stream.id)).toBe(TINY);

    agentStream!.consumed(1);
    await pair.settle();
    expect(pair.toEdge.frames(FrameType.WINDOW).map((f) => f.payload)).toEqual([u32Payload(TINY / 2)]);
    expect(pair.toAgent.dataBytes(stream.id)).toBe(TINY + TINY / 2);
    expect(drains).toEqual([]);

    // from now on the agent consumes what arrives, and the rest flows
    agentStream!.onData = (chunk) => {
      received.push(chunk.slice());
      agentStream!.consumed(chunk.byteLength);
    };
    agentStream!.consumed(TINY);
    await within(stream.whenDrained(), WAIT_MS, "the rest to be sent");
    await pair.settle();
    expect(concat(received)).toEqual(concat([data, more]));
    expect(pair.toAgent.dataBytes(stream.id)).toBe(data.byteLength + more.byteLength);
    expect(drains).toEqual([data.byteLength + more.byteLength]);
  });

  test("a stalled stream does not hold up another stream on the same mux, which moves 1 MiB", async () => {
    const agentStreams: Stream[] = [];
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: (s) => agentStreams.push(s) } });
    const stalled = pair.edge.open({ name: "A" });
    const flowing = pair.edge.open({ name: "B" });
    await pair.settle();
    const [a, b] = agentStreams;
    let aReceived = 0;
    a!.onData = (chunk) => (aReceived += chunk.byteLength); // never consumed
    const bReceived = readAll(b!);

    expect(stalled.write(randomBytes(1, 1024 * 1024))).toBe(false);
    const data = randomBytes(2, 1024 * 1024);
    await within(writeAll(flowing, data), WAIT_MS, "B to be written");
    expect(sha256(await within(bReceived, WAIT_MS, "B to arrive"))).toBe(sha256(data));

    expect(aReceived).toBe(TINY);
    expect(pair.toAgent.dataBytes(stalled.id)).toBe(TINY);
    expect(stalled.isClosed).toBe(false);
  });

  test("the receiver grants credit for the window it was built with, so a big window means few WINDOW frames", async () => {
    const window = 64 * 1024;
    const pair = memoryPair({ initialWindow: window, agent: { onStream: (s) => void readAll(s) } });
    const stream = pair.edge.open({});
    await within(writeAll(stream, new Uint8Array(1024 * 1024)), WAIT_MS, "1 MiB to be written");
    await pair.settle();
    const grants = pair.toEdge.frames(FrameType.WINDOW);
    // 1 MiB in grants of at least half a window: at most 32 of them
    expect(grants.length).toBeGreaterThan(0);
    expect(grants.length).toBeLessThanOrEqual((1024 * 1024) / (window / 2));
    for (const g of grants) expect(new DataView(g.payload.buffer, g.payload.byteOffset).getUint32(0)).toBeGreaterThanOrEqual(window / 2);
  });

  test("no DATA frame is larger than MAX_DATA_PAYLOAD, however big the write", async () => {
    const pair = memoryPair({ agent: { onStream: (s) => void readAll(s) } });
    const stream = pair.edge.open({});
    stream.write(new Uint8Array(300 * 1024));
    stream.end();
    await pair.settle();
    const sizes = pair.toAgent.frames(FrameType.DATA).map((f) => f.payload.byteLength);
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(300 * 1024);
    expect(Math.max(...sizes)).toBe(64 * 1024);
  });

  test("a mux built for a direct link (maxDataPayload DIRECT_DATA_PAYLOAD) sends DATA frames up to MAX_PAYLOAD, which the peer takes", async () => {
    let received: Promise<Uint8Array> | undefined;
    const pair = memoryPair({ edge: { maxDataPayload: DIRECT_DATA_PAYLOAD }, agent: { onStream: (s) => void (received = readAll(s)) } });
    const stream = pair.edge.open({});
    const data = randomBytes(11, 1024 * 1024 + 5);
    stream.write(data);
    stream.end();
    await pair.settle();
    const sizes = pair.toAgent.frames(FrameType.DATA).map((f) => f.payload.byteLength);
    expect(Math.max(...sizes)).toBe(MAX_PAYLOAD);
    // the window (512 KiB) takes two largest frames at a time
    expect(sizes.length).toBeLessThanOrEqual(6);
    expect(sha256(await within(received!, WAIT_MS, "the bytes"))).toBe(sha256(data));
    expect(pair.closes).toEqual({ edge: [], agent: [] });
  });

  test("a DATA size past MAX_PAYLOAD, which no peer would take, is refused when the mux is built", () => {
    expect(() => new Mux({ role: "edge", maxDataPayload: MAX_PAYLOAD + 1, send: () => "sent" })).toThrow(RangeError);
  });
});

describe("resets and half-close", () => {
  test("a reset mid-transfer reaches the other side's onReset and whenReset, and late frames are ignored", async () => {
    const accepted = signal<Stream>();
    const second = signal<{ data: Promise<Uint8Array> }>();
    const pair = memoryPair({
      initialWindow: TINY,
      agent: { onStream: (s) => (accepted.fired() ? second.resolve({ data: readAll(s) }) : accepted.resolve(s)) },
    });
    const stream = pair.edge.open({});
    const agentStream = await within(accepted.promise, WAIT_MS, "OPEN");
    const onReset = signal<string>();
    const whenReset = signal<string>();
    const someArrived = signal();
    let got = 0;
    agentStream.onReset = (code) => onReset.resolve(code);
    agentStream.whenReset((code) => whenReset.resolve(code));
    agentStream.onData = (chunk) => {
      got += chunk.byteLength;
      agentStream.consumed(chunk.byteLength);
      if (got >= 4 * TINY) someArrived.resolve();
    };

    expect(stream.write(randomBytes(3, 64 * TINY))).toBe(false);
    const drained = stream.whenDrained();
    const localReset = signal<string>();
    stream.whenReset((code) => localReset.resolve(code));
    await within(someArrived.promise, WAIT_MS, "part of the transfer");
    expect(stream.bytesSent).toBeLessThan(64 * TINY);

    // the agent writes in the same turn as the edge resets: its DATA crosses the RST
    agentStream.write(bytes("crossing the reset"));
    stream.reset(WireError.CANCELLED);
    expect(await drained).toBe(false);
    expect(localReset.fired()).toBe(true);
    expect(stream.isClosed).toBe(true);
    expect(stream.write(bytes("more"))).toBe(false);
    const sentBeforeReset = pair.toAgent.dataBytes(stream.id);

    expect(await within(onReset.promise, WAIT_MS, "onReset")).toBe(WireError.CANCELLED);
    expect(await within(whenReset.promise, WAIT_MS, "whenReset")).toBe(WireError.CANCELLED);
    expect(agentStream.isClosed).toBe(true);
    expect(agentStream.write(bytes("too late"))).toBe(false);

    // stragglers for the dead stream, both ways, are dropped without ending the session
    pair.edge.receive(encodeFrame(FrameType.DATA, stream.id, bytes("late data")));
    pair.edge.receive(encodeFrame(FrameType.WINDOW, stream.id, u32Payload(4096)));
    pair.edge.receive(encodeFrame(FrameType.FIN, stream.id));
    pair.edge.receive(encodeFrame(FrameType.RST, stream.id, textPayload("LATE")));
    pair.agent.receive(encodeFrame(FrameType.DATA, stream.id, bytes("late data")));
    pair.agent.receive(encodeFrame(FrameType.REPLY, stream.id, jsonPayload({})));
    await pair.settle();
    expect(pair.toAgent.dataBytes(stream.id)).toBe(sentBeforeReset);
    expect(pair.edge.closed).toBe(false);
    expect(pair.agent.closed).toBe(false);
    expect(pair.toAgent.frames(FrameType.ERROR)).toEqual([]);
    expect(pair.toEdge.frames(FrameType.ERROR)).toEqual([]);
    expect(pair.closes).toEqual({ edge: [], agent: [] });

    // the agent's DATA really crossed the RST, and the session still carries new streams
    expect(pair.toEdge.dataBytes(stream.id)).toBe("crossing the reset".length);
    const fresh = pair.edge.open({ again: true });
    fresh.write(bytes("after the reset"));
    fresh.end();
    const { data } = await within(second.promise, WAIT_MS, "a second OPEN");
    expect(text(await within(data, WAIT_MS, "the second stream"))).toBe("after the reset");
  });

  test("a reset from the accepting side reaches the opener with its code", async () => {
    const pair = memoryPair({ agent: { onStream: (s) => s.reset(WireError.UPSTREAM_FAILED) } });
    const stream = pair.edge.open({});
    const code = signal<string>();
    stream.onReset = (c) => code.resolve(c);
    expect(await within(code.promise, WAIT_MS, "the agent's RST")).toBe(WireError.UPSTREAM_FAILED);
    expect(stream.isClosed).toBe(true);
    expect(pair.edge.streamCount).toBe(0);
    expect(pair.agent.streamCount).toBe(0);
  });

  test("a reset that comes before its consumers attach (in the same message as the REPLY) reaches them when they do", async () => {
    // the REPLY and an RST, and the REPLY and a frame of no known type (which closes the connection), each in one message
    const unknownType = new Uint8Array([0x7f, 0, 0, 0, 0, 0, 0, 0, 0]);
    for (const [after, code] of [[(id: number) => encodeFrame(FrameType.RST, id), WireError.CANCELLED], [() => unknownType, WireError.PROTOCOL_ERROR]] as const) {
      const pair = memoryPair({ agent: { onStream: () => {} } });
      const stream = pair.edge.open({}, true);
      let replied = false;
      stream.onReply = () => (replied = true);
      pair.edge.receive(concat([encodeFrame(FrameType.REPLY, stream.id, jsonPayload({ status: 200, headers: [] })), after(stream.id)]));
      expect(replied).toBe(true);
      expect(pair.edge.streamCount).toBe(0); // the mux has forgotten the stream
      expect(stream.resetCode).toBe(code);
      // what an owner attaches only after awaiting the REPLY: a listener, a readable, a collector
      const heard: string[] = [];
      stream.whenReset((c) => heard.push(c));
      expect(heard).toEqual([code]);
      let failed = false;
      await within(readableFrom(stream).getReader().read(), WAIT_MS, "the read").catch(() => (failed = true));
      expect(failed).toBe(true);
      await expect(within(collect(stream, 10), WAIT_MS, "the collect")).rejects.toThrow(`stream reset: ${code}`);
    }
  });

  test("a whole body (its FIN included) followed by a reset still reads to its end, whether the reader came before or after", async () => {
    for (const attach of ["before", "after"] as const) {
      const pair = memoryPair({ agent: { onStream: () => {} } });
      const stream = pair.edge.open({}); // this side not ended: the reset still finds the stream open
      let readable = attach === "before" ? readableFrom(stream) : undefined;
      pair.edge.receive(concat([encodeFrame(FrameType.DATA, stream.id, bytes("whole"), true), encodeFrame(FrameType.RST, stream.id)]));
      expect(stream.resetCode).toBe(WireError.CANCELLED);
      expect(stream.peerEnded).toBe(true);
      const reader = (readable ??= readableFrom(stream)).getReader();
      const first = await within(reader.read(), WAIT_MS, "the body");
      expect(`${attach}: ${text(first.value!)}`).toBe(`${attach}: whole`);
      expect((await within(reader.read(), WAIT_MS, "the end")).done).toBe(true);
    }
  });

  test("a stream that ends normally has no reset code", async () => {
    const pair = memoryPair({ agent: { onStream: (s) => s.reply({}, true) } });
    const stream = pair.edge.open({}, true);
    const ended = signal<void>();
    stream.onEnd = () => ended.resolve();
    await within(ended.promise, WAIT_MS, "the FIN");
    expect(stream.isClosed).toBe(true);
    expect(stream.resetCode).toBeUndefined();
  });

  test("an RST with an empty code reads as CANCELLED", async () => {
    const pair = memoryPair({ agent: { onStream: () => {} } });
    const stream = pair.edge.open({});
    const code = signal<string>();
    stream.onReset = (c) => code.resolve(c);
    pair.edge.receive(encodeFrame(FrameType.RST, stream.id));
    expect(await within(code.promise, WAIT_MS, "onReset")).toBe(WireError.CANCELLED);
  });

  test("after a FIN one way, data still flows the other way, credit included", async () => {
    const accepted = signal<Stream>();
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: (s) => accepted.resolve(s) } });
    const stream = pair.edge.open({});
    const agentStream = await within(accepted.promise, WAIT_MS, "OPEN");
    const request = readAll(agentStream);
    stream.write(bytes("GET / HTTP/1.1\r\n\r\n"));
    stream.end();
    expect(stream.write(bytes("after end"))).toBe(false);
    expect(text(await within(request, WAIT_MS, "the request"))).toBe("GET / HTTP/1.1\r\n\r\n");
    await pair.settle();
    expect(pair.toAgent.frames(FrameType.FIN).length).toBe(1);

    // a response many windows long: the edge, which has sent FIN, must keep granting credit
    const response = randomBytes(5, 100 * TINY);
    const got = readAll(stream);
    await within(writeAll(agentStream, response, 3000), WAIT_MS, "the response to be written");
    expect(sha256(await within(got, WAIT_MS, "the response"))).toBe(sha256(response));
    expect(pair.toEdge.frames(FrameType.WINDOW)).toEqual([]);
    expect(pair.toAgent.frames(FrameType.WINDOW).length).toBeGreaterThanOrEqual(99);
    expect(stream.isClosed).toBe(true);
    expect(agentStream.isClosed).toBe(true);
    expect(agentStream.write(bytes("after both ends"))).toBe(false);
  });

  test("end() with bytes still waiting for credit sends FIN only after the last of them", async () => {
    const chunks: Uint8Array[] = [];
    let agentStream: Stream | undefined;
    const ended = signal();
    const pair = memoryPair({
      initialWindow: TINY,
      agent: {
        onStream: (s) => {
          agentStream = s;
          s.onData = (chunk) => chunks.push(chunk.slice()); // consumed only when the test says so
          s.onEnd = () => ended.resolve();
        },
      },
    });
    const stream = pair.edge.open({});
    const data = randomBytes(6, 5 * TINY);
    expect(stream.write(data)).toBe(false);
    stream.end();
    await pair.settle();
    expect(pair.toAgent.frames().filter((f) => f.type === FrameType.FIN || f.fin)).toEqual([]);
    expect(stream.isClosed).toBe(false);

    agentStream!.onData = (chunk) => {
      chunks.push(chunk.slice());
      agentStream!.consumed(chunk.byteLength);
    };
    agentStream!.consumed(TINY);
    await within(ended.promise, WAIT_MS, "FIN");
    expect(sha256(concat(chunks))).toBe(sha256(data));
    const mine = pair.toAgent.frames().filter((f) => f.stream === stream.id);
    const fins = mine.filter((f) => f.type === FrameType.FIN || f.fin);
    expect(fins.length).toBe(1);
    expect(fins[0]).toBe(mine.at(-1)!); // the FIN comes with (or after) the last bytes, never before
  });
  test("whenDrained() after end() resolves true once the last bytes are out, even when that also closes the stream", async () => {
    const accepted = signal<Stream>();
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: (s) => accepted.resolve(s) } });
    const request = pair.edge.open({});
    request.end(); // a request without a body: the agent's side is half-closed from the start
    const response = readAll(request);
    const agentStream = await within(accepted.promise, WAIT_MS, "OPEN");
    await pair.settle();

    const body = randomBytes(12, 5 * TINY);
    expect(agentStream.write(body)).toBe(false);
    agentStream.end();
    // the last DATA and the FIN go out together, which also finishes the stream: everything was sent
    expect(await within(agentStream.whenDrained(), WAIT_MS, "the body to be sent")).toBe(true);
    expect(sha256(await within(response, WAIT_MS, "the response"))).toBe(sha256(body));
    expect(agentStream.isClosed).toBe(true);
  });
});

describe("protocol errors", () => {
  /** A mux with no peer: what it sends is captured, what it receives is given by hand. */
  function lone(role: "edge" | "agent", initialWindow?: number) {
    const sent: Uint8Array[] = [];
    const closes: { code: string; message: string }[] = [];
    const resets: string[] = [];
    const control: [FrameTypeValue, Uint8Array][] = [];
    const mux = new Mux({
      role,
      initialWindow,
      send: (frame) => {
        sent.push(frame.slice());
        return "sent";
      },
      onStream: (s) => {
        s.onData = () => {}; // never consumes
        s.onReset = (code) => resets.push(code);
      },
      onControl: (type, payload) => control.push([type, payload.slice()]),
      onClose: (code, message) => closes.push({ code, message }),
    });
    return { mux, sent, closes, resets, control };
  }

  const raw = (type: number, stream: number, payload: Uint8Array = new Uint8Array(0)) => {
    const out = new Uint8Array(HEADER_LENGTH + payload.byteLength);
    out[0] = type;
    new DataView(out.buffer).setUint32(1, stream);
    new DataView(out.buffer).setUint32(5, payload.byteLength);
    out.set(payload, HEADER_LENGTH);
    return out;
  };
  const open = (id: number) => encodeFrame(FrameType.OPEN, id, jsonPayload({ tunnel: "t" }));

  const cases: {
    name: string;
    role?: "edge" | "agent";
    /** Frames (or calls) that set the scene; `onReset` is given to streams this side opens. */
    before?: (m: Mux, onReset: (code: string) => void) => Uint8Array[] | void;
    bad: Uint8Array;
    /** Streams open when the bad frame arrives: they must see the reset. */
    streams?: number;
  }[] = [
    { name: "garbage shorter than a header", bad: new Uint8Array([0xde, 0xad, 0xbe]) },
    { name: "garbage bytes", bad: randomBytes(99, 40).map((b, i) => (i === 0 ? 0xde : b)) },
    { name: "an unknown frame type", bad: raw(0x7f, 1) },
    { name: "a control frame on a data stream", bad: raw(FrameType.PING, 1, new Uint8Array(8)) },
    { name: "DATA on stream 0", bad: raw(FrameType.DATA, 0, bytes("x")) },
    { name: "a PING of 5 bytes (PING_BYTES is 4)", bad: raw(FrameType.PING, 0, new Uint8Array(PING_BYTES + 1)) },
    { name: "a PING of 64 KiB", bad: raw(FrameType.PING, 0, new Uint8Array(64 * 1024)) },
    { name: "an empty PING", bad: raw(FrameType.PING, 0) },
    { name: "a PONG of 8 bytes", bad: raw(FrameType.PONG, 0, new Uint8Array(8)) },
    { name: "a PING of 5 bytes on a side with streams open", before: () => [open(1)], bad: raw(FrameType.PING, 0, new Uint8Array(5)), streams: 1 },
    { name: "a frame bigger than MAX_PAYLOAD", before: () => [open(1)], bad: raw(FrameType.DATA, 1, new Uint8Array(MAX_PAYLOAD + 1)), streams: 1 },
    { name: "DATA for a stream the peer never opened", bad: raw(FrameType.DATA, 5, bytes("x")) },
    { name: "DATA for an id of our own parity we never opened", bad: raw(FrameType.DATA, 2, bytes("x")) },
    { name: "DATA for a never-opened id on the agent", role: "agent", bad: raw(FrameType.DATA, 4, bytes("x")) },
    { name: "an OPEN with the wrong parity", bad: open(2) },
    { name: "an OPEN with the wrong parity on the agent", role: "agent", bad: open(3) },
    { name: "an OPEN that reuses an id", before: () => [open(1)], bad: open(1), streams: 1 },
    { name: "an OPEN with an id below one already opened", before: () => [open(5)], bad: open(3), streams: 1 },
    { name: "an OPEN whose metadata is not JSON", bad: raw(FrameType.OPEN, 1, bytes("{tunnel")) },
    { name: "a REPLY whose metadata is not JSON", before: (m, onReset) => void (m.open({}).onReset = onReset), bad: raw(FrameType.REPLY, 2, bytes("<html>")), streams: 1 },
    {
      name: "DATA beyond the granted window",
      before: () => [open(1), raw(FrameType.DATA, 1, new Uint8Array(TINY))],
      bad: raw(FrameType.DATA, 1, bytes("!")),
      streams: 1,
    },
    { name: "one DATA frame bigger than the whole window", before: () => [open(1)], bad: raw(FrameType.DATA, 1, new Uint8Array(TINY + 1)), streams: 1 },
    { name: "a WINDOW with a 3-byte payload", before: () => [open(1)], bad: raw(FrameType.WINDOW, 1, new Uint8Array([0, 4, 0])), streams: 1 },
    { name: "a WINDOW that grows the credit past 2^31", before: () => [open(1)], bad: raw(FrameType.WINDOW, 1, u32Payload(0xffffffff)), streams: 1 },
    { name: "DATA after FIN", before: () => [open(1), raw(FrameType.FIN, 1)], bad: raw(FrameType.DATA, 1, bytes("x")), streams: 1 },
  ];

  for (const c of cases) {
    test(`${c.name} closes the mux with a PROTOCOL_ERROR frame and throws nothing`, () => {
      const { mux, sent, closes, resets } = lone(c.role ?? "edge", TINY);
      for (const message of c.before?.(mux, (code) => resets.push(code)) ?? []) mux.receive(message);
      expect(mux.closed).toBe(false);
      expect(mux.streamCount).toBe(c.streams ?? 0);
      const sentBefore = sent.length;

      expect(() => mux.receive(c.bad)).not.toThrow();

      expect(mux.closed).toBe(true);
      expect(sent.length).toBe(sentBefore + 1);
      const error = sent.at(-1)!;
      expect(error.subarray(0, 5)).toEqual(new Uint8Array([FrameType.ERROR, 0, 0, 0, 0]));
      const body = JSON.parse(text(error.subarray(HEADER_LENGTH)));
      expect(body.code).toBe(WireError.PROTOCOL_ERROR);
      expect(body.message.length).toBeGreaterThan(0);
      expect(closes).toEqual([{ code: WireError.PROTOCOL_ERROR, message: body.message }]);
      expect(mux.streamCount).toBe(0);
      // every stream that was open sees the session's end as a reset
      expect(resets).toEqual(Array<string>(c.streams ?? 0).fill(WireError.PROTOCOL_ERROR));

      // a closed mux ignores whatever comes next
      mux.receive(raw(FrameType.PING, 0, new Uint8Array(8)));
      mux.receive(c.bad);
      expect(sent.length).toBe(sentBefore + 1);
      expect(closes.length).toBe(1);
    });
  }

  test("a window overrun by pieces of DATA (receiveFrame) closes the mux with a PROTOCOL_ERROR frame and throws nothing", () => {
    const { mux, sent, closes, resets } = lone("edge", TINY);
    mux.receive(open(1));
    const piece = (n: number) => ({ type: FrameType.DATA, stream: 1, payload: new Uint8Array(n), fin: false });
    mux.receiveFrame(piece(TINY - 1));
    expect(mux.closed).toBe(false);
    expect(() => mux.receiveFrame(piece(2))).not.toThrow();
    expect(mux.closed).toBe(true);
    expect(JSON.parse(text(sent.at(-1)!.subarray(HEADER_LENGTH))).code).toBe(WireError.PROTOCOL_ERROR);
    expect(closes.map((c) => c.code)).toEqual([WireError.PROTOCOL_ERROR]);
    expect(resets).toEqual([WireError.PROTOCOL_ERROR]);
  });

  test("PING is answered with a PONG carrying the same payload, and the mux stays open", () => {
    const { mux, sent, control } = lone("agent");
    const payload = new Uint8Array([1, 2, 3, 4]);
    mux.receive(raw(FrameType.PING, 0, payload));
    expect(sent).toEqual([raw(FrameType.PONG, 0, payload)]);
    mux.receive(raw(FrameType.PONG, 0, payload));
    expect(sent.length).toBe(1);
    expect(control).toEqual([]);
    expect(mux.closed).toBe(false);
  });

  test("ping() over the pair comes back as a PONG with the same bytes", async () => {
    const pair = memoryPair();
    pair.edge.ping();
    await pair.settle();
    const [ping] = pair.toAgent.frames(FrameType.PING);
    const [pong] = pair.toEdge.frames(FrameType.PONG);
    expect(ping!.payload.byteLength).toBeGreaterThan(0);
    expect(pong!.payload).toEqual(ping!.payload);
  });

  test("HELLO, READY, ERROR and GOAWAY go to onControl with their payloads", () => {
    const { mux, sent, control } = lone("edge");
    const kinds = [FrameType.HELLO, FrameType.READY, FrameType.ERROR, FrameType.GOAWAY] as const;
    for (const type of kinds) mux.receive(raw(type, 0, jsonPayload({ type })));
    expect(control).toEqual(kinds.map((type) => [type, jsonPayload({ type })]));
    expect(sent).toEqual([]);
    expect(mux.closed).toBe(false);
  });

  test("every control frame of wire.ts but PING and PONG goes to onControl (none is dropped on the way)", () => {
    const { mux, control } = lone("edge");
    const kinds = [...CONTROL_FRAMES].filter((t) => t !== FrameType.PING && t !== FrameType.PONG) as FrameTypeValue[];
    // the policy notes' frame and the live session's, added side by side, are in the set it walks
    for (const t of [FrameType.POLICY, FrameType.ADD, FrameType.ADDED, FrameType.REMOVE, FrameType.REMOVED, FrameType.CONFIG, FrameType.STATUS, FrameType.ASK, FrameType.ANSWER, FrameType.POLICY_PASSED]) expect(kinds).toContain(t);
    for (const type of kinds) mux.receive(raw(type, 0, jsonPayload({ type })));
    expect(control.map(([type]) => type)).toEqual(kinds);
    expect(mux.closed).toBe(false);
  });

  test("an OPEN nobody accepts (no onStream) is reset, not a protocol error", () => {
    const sent: Uint8Array[] = [];
    const mux = new Mux({ role: "edge", send: (f) => (sent.push(f.slice()), "sent") });
    mux.receive(open(1));
    expect(sent).toEqual([encodeFrame(FrameType.RST, 1, textPayload(WireError.UPSTREAM_FAILED))]);
    // its late DATA is ignored
    mux.receive(raw(FrameType.DATA, 1, bytes("x")));
    expect(mux.closed).toBe(false);
    expect(sent.length).toBe(1);
  });

  test("an OPEN beyond maxStreams is reset and the ones before it live on", () => {
    const sent: Uint8Array[] = [];
    const mux = new Mux({ role: "edge", maxStreams: 2, onStream: () => {}, send: (f) => (sent.push(f.slice()), "sent") });
    for (const id of [1, 3, 5]) mux.receive(open(id));
    expect(mux.streamCount).toBe(2);
    expect(sent).toEqual([encodeFrame(FrameType.RST, 5, textPayload(WireError.UPSTREAM_FAILED))]);
    expect(mux.closed).toBe(false);
  });
});

describe("closing and transport pressure", () => {
  test("close() resets every open stream, fails pending drains and refuses new work", async () => {
    const pair = memoryPair({ initialWindow: TINY, agent: { onStream: () => {} }, edge: { onStream: () => {} } });
    const fromAgent = pair.agent.open({});
    const ours = [pair.edge.open({}), pair.edge.open({})];
    await pair.settle();
    const theirs = pair.edge.streams.get(fromAgent.id)!;
    const all = [...ours, theirs];
    const codes: string[] = [];
    const listened: string[] = [];
    for (const s of all) {
      s.onReset = (code) => codes.push(code);
      s.whenReset((code) => listened.push(code));
    }
    expect(ours[0]!.write(new Uint8Array(4 * TINY))).toBe(false);
    const drained = ours[0]!.whenDrained();
    const framesBefore = pair.toAgent.log.length;

    pair.edge.close();
    expect(codes).toEqual([WireError.GOING_AWAY, WireError.GOING_AWAY, WireError.GOING_AWAY]);
    expect(listened).toEqual(codes);
    expect(await drained).toBe(false);
    expect(pair.closes.edge).toEqual([{ code: WireError.GOING_AWAY, message: "connection closed" }]);
    expect(pair.edge.streamCount).toBe(0);
    for (const s of all) {
      expect(s.isClosed).toBe(true);
      expect(s.write(bytes("x"))).toBe(false);
    }
    expect(() => pair.edge.open({})).toThrow("mux is closed");
    pair.edge.sendControl(FrameType.GOAWAY);
    pair.edge.ping();
    ours[1]!.end();
    expect(pair.toAgent.log.length).toBe(framesBefore);

    // a second close changes nothing
    pair.edge.close(WireError.PROTOCOL_ERROR, "again");
    expect(pair.closes.edge.length).toBe(1);
    expect(codes.length).toBe(3);
  });

  test("close() passes its code to the streams and to onClose", () => {
    const pair = memoryPair();
    const s = pair.edge.open({});
    const code = signal<string>();
    s.onReset = (c) => code.resolve(c);
    pair.edge.close("REVOKED", "token revoked");
    expect(code.fired()).toBe(true);
    expect(pair.closes.edge).toEqual([{ code: "REVOKED", message: "token revoked" }]);
  });

  test('a transport that says "closed" closes the mux', () => {
    const closes: string[] = [];
    const mux = new Mux({ role: "edge", send: () => "closed", onClose: (code) => closes.push(code) });
    const s = mux.open({});
    expect(mux.closed).toBe(true);
    expect(s.isClosed).toBe(true);
    expect(closes).toEqual([WireError.GOING_AWAY]);
  });

  test('after send() reports "backpressure", no DATA is sent until drained()', async () => {
    const received = new Map<number, Promise<Uint8Array>>();
    const pair = memoryPair({ backpressureAt: 8 * 1024, agent: { onStream: (s) => received.set(s.id, readAll(s)) } });
    const streams = [pair.edge.open({}), pair.edge.open({}), pair.edge.open({})];
    const data = streams.map((_, i) => randomBytes(50 + i, 200 * 1024));
    // with the default window, only the transport can hold these writes back
    expect(streams[0]!.write(data[0]!)).toBe(false);
    expect(streams[1]!.write(data[1]!)).toBe(false);
    expect(streams[2]!.write(data[2]!.subarray(0, 10))).toBe(false);
    streams[2]!.write(data[2]!.subarray(10));
    for (const s of streams) s.end();

    await within(Promise.all(streams.map((s) => s.whenDrained())), WAIT_MS, "all streams to drain");
    for (const [i, s] of streams.entries()) {
      expect(sha256(await within(received.get(s.id)!, WAIT_MS, `stream ${s.id}`))).toBe(sha256(data[i]!));
    }

    let blocked = false;
    let pauses = 0;
    for (const e of pair.toAgent.log) {
      if (e.kind === "drained") blocked = false;
      else {
        if (blocked && e.frame.type === FrameType.DATA) throw new Error(`DATA on stream ${e.frame.stream} while the transport was blocked`);
        if (e.result === "backpressure") {
          if (!blocked) pauses++;
          blocked = true;
        }
      }
    }
    // the transport really pushed back, many times, and each time the mux waited
    expect(pauses).toBeGreaterThan(10);
  });

  test("a stream opened while the transport is blocked waits for drained() like the others", async () => {
    let answer: SendResult = "backpressure";
    const sent: number[] = [];
    const mux = new Mux({
      role: "edge",
      send: (f) => {
        sent.push(f[0]!);
        return answer;
      },
    });
    const s = mux.open({}); // the OPEN itself is answered with backpressure
    expect(s.write(bytes("held"))).toBe(false);
    expect(sent).toEqual([FrameType.OPEN]);
    answer = "sent";
    const drained = s.whenDrained();
    mux.drained();
    expect(sent).toEqual([FrameType.OPEN, FrameType.DATA]);
    expect(await drained).toBe(true);
  });
});

describe("web-stream adapters", () => {
  /** A source of `data` in chunks of random sizes. */
  function sourceOf(data: Uint8Array, seed: number, onCancel?: (reason: unknown) => void): ReadableStream<Uint8Array> {
    const rand = prng(seed);
    let at = 0;
    return new ReadableStream<Uint8Array>({
      pull(controller) {
        if (at >= data.byteLength) return controller.close();
        const n = between(rand, 1, 100_000);
        controller.enqueue(data.slice(at, at + n));
        at += n;
      },
      cancel: onCancel,
    });
  }

  async function drain(readable: ReadableStream<Uint8Array>): Promise<Uint8Array> {
    const chunks: Uint8Array[] = [];
    for await (const chunk of readable) chunks.push(chunk);
    return concat(chunks);
  }

  test("pipeInto and readableFrom move 5 MiB intact through a small window and count the bytes", async () => {
    const window = 16 * 1024;
    const readable = signal<ReadableStream<Uint8Array>>();
    let counted = 0;
    const pair = memoryPair({ initialWindow: window, agent: { onStream: (s) => readable.resolve(readableFrom(s, (n) => (counted += n))) } });
    const data = randomBytes(77, 5 * 1024 * 1024);
    const stream = pair.edge.open({});
    let piped = 0;
    const copying = pipeInto(sourceOf(data, 77), stream, (n) => (piped += n));
    const got = drain(await within(readable.promise, WAIT_MS, "OPEN"));

    expect(await within(copying, 10_000, "pipeInto")).toBe(data.byteLength);
    const arrived = await within(got, 10_000, "the readable to end");
    expect(arrived.byteLength).toBe(data.byteLength);
    expect(sha256(arrived)).toBe(sha256(data));
    expect(piped).toBe(data.byteLength);
    expect(counted).toBe(data.byteLength);
    expect(stream.bytesSent).toBe(data.byteLength);
    // credit was granted along the way, not all up front
    await pair.settle();
    expect(pair.toEdge.frames(FrameType.WINDOW).length).toBeGreaterThanOrEqual(data.byteLength / window);
  }, 15_000);

  test("readableFrom returns credit only as the reader pulls", async () => {
    const window = 16 * 1024;
    const readable = signal<ReadableStream<Uint8Array>>();
    const pair = memoryPair({ initialWindow: window, agent: { onStream: (s) => readable.resolve(readableFrom(s)) } });
    const stream = pair.edge.open({});
    const data = randomBytes(9, 4 * window);
    stream.write(data);
    stream.end();
    const reader = (await within(readable.promise, WAIT_MS, "OPEN")).getReader();
    await pair.settle();
    expect(stream.bytesSent).toBe(window);
    expect(pair.toEdge.frames(FrameType.WINDOW)).toEqual([]);

    const chunks: Uint8Array[] = [];
    for (;;) {
      const { done, value } = await within(reader.read(), WAIT_MS, "a chunk");
      if (done) break;
      chunks.push(value);
    }
    expect(sha256(concat(chunks))).toBe(sha256(data));
  });

  test("cancelling the reader resets the stream, and the sender learns it", async () => {
    const readable = signal<ReadableStream<Uint8Array>>();
    const pair = memoryPair({ agent: { onStream: (s) => readable.resolve(readableFrom(s)) } });
    const stream = pair.edge.open({});
    const code = signal<string>();
    stream.onReset = (c) => code.resolve(c);
    stream.write(bytes("unwanted"));
    await (await within(readable.promise, WAIT_MS, "OPEN")).cancel();
    expect(await within(code.promise, WAIT_MS, "the RST")).toBe(WireError.CANCELLED);
  });

  test('cancelling with "discard" keeps the other direction open and keeps credit flowing', async () => {
    const window = 16 * 1024;
    const accepted = signal<{ s: Stream; r: ReadableStream<Uint8Array> }>();
    const pair = memoryPair({ initialWindow: window, agent: { onStream: (s) => accepted.resolve({ s, r: readableFrom(s, undefined, "discard") }) } });
    const stream = pair.edge.open({});
    const { s: agentStream, r } = await within(accepted.promise, WAIT_MS, "OPEN");
    await r.cancel();
    // the edge may keep sending far more than a window: it is consumed and thrown away
    await within(writeAll(stream, new Uint8Array(8 * window)), WAIT_MS, "the discarded upload");
    const back = readAll(stream);
    agentStream.write(bytes("still here"));
    agentStream.end();
    expect(text(await within(back, WAIT_MS, "the agent's answer"))).toBe("still here");
    expect(pair.closes).toEqual({ edge: [], agent: [] });
  });

  test("a reset stream makes its readable fail, with no reason (which Bun would print as an unhandled error)", async () => {
    const readable = signal<ReadableStream<Uint8Array>>();
    const pair = memoryPair({ agent: { onStream: (s) => readable.resolve(readableFrom(s)) } });
    const stream = pair.edge.open({});
    const reader = (await within(readable.promise, WAIT_MS, "OPEN")).getReader();
    stream.reset(WireError.UPSTREAM_FAILED);
    let failedWith: unknown = "no failure";
    await within(reader.read(), WAIT_MS, "the read").catch((err: unknown) => (failedWith = err));
    expect(failedWith).toBeUndefined();
  });

  test("pipeInto resets the stream when the source fails", async () => {
    const code = signal<string>();
    const pair = memoryPair({ agent: { onStream: (s) => (s.onReset = (c) => code.resolve(c)) } });
    const stream = pair.edge.open({});
    const failing = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(bytes("some"));
        controller.error(new Error("disk on fire"));
      },
    });
    await within(pipeInto(failing, stream), WAIT_MS, "pipeInto");
    expect(stream.isClosed).toBe(true);
    expect(await within(code.promise, WAIT_MS, "the RST")).toBe(WireError.CANCELLED);
  });

  test("pipeInto stops, cancels its source and reports what it copied when the peer resets", async () => {
    const window = 16 * 1024;
    const pair = memoryPair({ initialWindow: window, agent: { onStream: (s) => (s.onData = () => s.reset(WireError.UPSTREAM_FAILED)) } });
    const stream = pair.edge.open({});
    const cancelled = signal();
    const data = randomBytes(10, 1024 * 1024);
    const copied = await within(pipeInto(sourceOf(data, 10, () => cancelled.resolve()), stream), WAIT_MS, "pipeInto");
    expect(copied).toBeGreaterThan(0);
    expect(copied).toBeLessThan(data.byteLength);
    expect(cancelled.fired()).toBe(true);
    expect(stream.isClosed).toBe(true);
  });
});

describe("FIN carried by other frames", () => {
  test("a bodyless OPEN, a REPLY and a last DATA each carry the FIN: three frames for a whole exchange", async () => {
    const pair = memoryPair({
      agent: {
        onStream: (s) => {
          s.reply({ status: 200 });
          s.end(bytes("the whole body"));
        },
      },
    });
    const stream = pair.edge.open({ kind: "http" }, true);
    const replied = new Promise((resolve) => (stream.onReply = resolve));
    await pair.settle();
    expect(await replied).toEqual({ status: 200 });
    expect(text(await readAll(stream))).toBe("the whole body");
    const frames = [...pair.toAgent.frames(), ...pair.toEdge.frames()].filter((f) => f.stream === stream.id);
    expect(frames.map((f) => [f.type, f.fin])).toEqual([
      [FrameType.OPEN, true],
      [FrameType.REPLY, false],
      [FrameType.DATA, true],
    ]);
    expect(stream.isClosed).toBe(true);
    expect(pair.edge.streamCount + pair.agent.streamCount).toBe(0);
  });

  test("bytes and the end that arrive before a consumer attaches wait for it, in order", async () => {
    const pair = memoryPair({
      agent: {
        onStream: (s) => {
          s.reply({}, false);
          s.write(bytes("early "));
          s.end(bytes("bytes"));
        },
      },
    });
    const stream = pair.edge.open({}, true);
    await pair.settle(); // everything has arrived; nobody has read it yet
    const seen: string[] = [];
    stream.onEnd = () => seen.push("<end>");
    stream.onData = (chunk) => seen.push(new TextDecoder().decode(chunk));
    expect(seen).toEqual(["early ", "bytes", "<end>"]);
  });
});

describe("frames batched per event-loop turn (batchWrites, the edge's and the agent's setting)", () => {
  /** A mux whose sent messages are recorded as the frame types each carried. */
  function recorder(batchWrites: boolean) {
    const messages: string[][] = [];
    const mux = new Mux({
      role: "edge",
      batchWrites,
      send(message) {
        const types: string[] = [];
        let at = 0;
        while (at < message.byteLength) {
          types.push(message[at]! & 0x80 ? `${message[at]! & 0x7f}+fin` : String(message[at]));
          at += HEADER_LENGTH + new DataView(message.buffer, message.byteOffset + at + 5, 4).getUint32(0);
        }
        messages.push(types);
        return "sent";
      },
    });
    return { mux, messages };
  }
  const endOfTurn = () => new Promise((resolve) => setImmediate(resolve));

  test("three requests opened in one turn leave as one message at its end, in order", async () => {
    const { mux, messages } = recorder(true);
    const a = mux.open({ n: 1 }, true);
    const b = mux.open({ n: 2 }, true);
    const c = mux.open({ n: 3 }, true);
    expect(messages).toHaveLength(0); // nothing yet: the turn is not over
    await endOfTurn();
    expect(messages).toEqual([[`${FrameType.OPEN}+fin`, `${FrameType.OPEN}+fin`, `${FrameType.OPEN}+fin`]]);
    expect([a.id, b.id, c.id]).toEqual([2, 4, 6]);
  });

  test("the bytes several streams write in one turn leave with their OPENs in one message", async () => {
    const { mux, messages } = recorder(true);
    const s = mux.open({ n: 1 });
    s.write(new Uint8Array([1, 2, 3]));
    const t = mux.open({ n: 2 });
    t.write(new Uint8Array([4]));
    s.end();
    expect(messages).toHaveLength(0);
    await endOfTurn();
    expect(messages).toEqual([[String(FrameType.OPEN), String(FrameType.DATA), String(FrameType.OPEN), String(FrameType.DATA), String(FrameType.FIN)]]);
  });

  test("a batch that reaches BATCH_BYTES leaves at once, without waiting for the turn's end", () => {
    const { mux, messages } = recorder(true);
    const s = mux.open({ n: 1 });
    s.write(new Uint8Array(BATCH_BYTES));
    expect(messages).toEqual([[String(FrameType.OPEN), String(FrameType.DATA)]]);
  });

  test("a control frame leaves at once: a GOAWAY said just before the transport closes is not lost", () => {
    const { mux, messages } = recorder(true);
    mux.open({ n: 1 }, true);
    mux.sendControl(FrameType.GOAWAY);
    expect(messages).toEqual([[`${FrameType.OPEN}+fin`, String(FrameType.GOAWAY)]]);
  });

  test("a control frame sent in the batch (an inspector's note) waits for the turn's end, in order with the stream frames around it", async () => {
    const { mux, messages } = recorder(true);
    const s = mux.open({ n: 1 });
    mux.sendEncodedControlInBatch(FrameType.POLICY_PASSED, new TextEncoder().encode("{}"));
    s.write(new Uint8Array([1]));
    expect(messages).toHaveLength(0); // no write of its own
    await endOfTurn();
    expect(messages).toEqual([[String(FrameType.OPEN), String(FrameType.POLICY_PASSED), String(FrameType.DATA)]]);
  });

  test("closing the mux sends what waits first; the turn's end then sends nothing more", async () => {
    const { mux, messages } = recorder(true);
    mux.open({ n: 1 }, true);
    mux.close();
    expect(messages).toEqual([[`${FrameType.OPEN}+fin`]]);
    await endOfTurn();
    expect(messages).toHaveLength(1);
  });

  test("without it, each frame is its own message at once", () => {
    const { mux, messages } = recorder(false);
    mux.open({ n: 1 }, true);
    const s = mux.open({ n: 2 });
    s.write(new Uint8Array([1]));
    expect(messages).toEqual([[`${FrameType.OPEN}+fin`], [String(FrameType.OPEN)], [String(FrameType.DATA)]]);
  });
});
