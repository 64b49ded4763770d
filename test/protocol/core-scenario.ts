/**
 * The mux's core scenario, independent of the transport, so the same test runs
 * over the in-memory pair and over a real WebSocket:
 *
 *   - one stream whose consumer never reads (it must get exactly one window, then stall),
 *   - one big edge -> agent transfer, checked by SHA-256 on the agent and reported back,
 *   - one agent -> edge transfer, checked by SHA-256 on the edge,
 *   - several echo streams, each carrying its own bytes there and back,
 *
 * all at once on one connection. The stalled stream must not hold up the others.
 */
import { expect } from "bun:test";
import type { Mux, Stream } from "../../src/protocol/mux.ts";
import { WireError } from "../../src/protocol/wire.ts";
import { randomBytes, sha256, signal, text, within } from "./support.ts";

export interface ScenarioOptions {
  /** The window both muxes were built with. */
  initialWindow: number;
  /** Bytes of the big edge -> agent transfer. */
  bigSize: number;
  /** Bytes of the agent -> edge transfer. */
  upSize: number;
  echoStreams: number;
  echoSize: number;
  /** Bound for the whole scenario. */
  timeoutMs: number;
}

type Meta = { kind: "stall" | "sink" | "echo" | "source"; size?: number; seed?: number };

/** Writes `data` in pieces, waiting for drain whenever the stream says so, then ends it. */
export async function writeAll(stream: Stream, data: Uint8Array, piece = 16 * 1024): Promise<void> {
  for (let at = 0; at < data.byteLength; at += piece) {
    if (!stream.write(data.subarray(at, at + piece)) && !(await stream.whenDrained())) {
      throw new Error(`stream ${stream.id} ended while writing`);
    }
  }
  stream.end();
}

/** Reads a stream to its end, consuming as it goes; rejects if the stream is reset. */
export function readAll(stream: Stream): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  return new Promise((resolve, reject) => {
    stream.onData = (chunk) => {
      chunks.push(chunk.slice());
      stream.consumed(chunk.byteLength);
    };
    stream.onEnd = () => resolve(Buffer.concat(chunks));
    stream.whenReset((code) => reject(new Error(`stream ${stream.id} reset: ${code}`)));
  });
}

/** The agent's side: what it does with each stream the edge opens. */
export function agentHandlers(stalled: { stream?: Stream; received: number; reset: ReturnType<typeof signal<string>> }) {
  return (stream: Stream) => {
    const meta = stream.meta as Meta;
    switch (meta.kind) {
      case "stall":
        stalled.stream = stream;
        stream.onData = (chunk) => (stalled.received += chunk.byteLength); // never consumed
        stream.onReset = (code) => stalled.reset.resolve(code);
        return;
      case "sink": {
        // hashes what arrives and answers with the digest
        const hasher = new Bun.CryptoHasher("sha256");
        stream.onData = (chunk) => {
          hasher.update(chunk);
          stream.consumed(chunk.byteLength);
        };
        stream.onEnd = () => {
          stream.write(new TextEncoder().encode(hasher.digest("hex")));
          stream.end();
        };
        return;
      }
      case "echo": {
        // returns credit only once the echo is out, so a slow edge slows this stream's sender
        let owed = 0;
        stream.onDrain = () => {
          stream.consumed(owed);
          owed = 0;
        };
        stream.onData = (chunk) => {
          owed += chunk.byteLength;
          if (stream.write(chunk.slice())) stream.onDrain!();
        };
        stream.onEnd = () => stream.end();
        return;
      }
      case "source":
        stream.onEnd = () => {};
        void writeAll(stream, randomBytes(meta.seed!, meta.size!));
        return;
    }
  };
}

export function newStalled() {
  return { stream: undefined as Stream | undefined, received: 0, reset: signal<string>() };
}

/** Runs the scenario from the edge; the agent must have been built with agentHandlers(stalled). */
export async function runCoreScenario(edge: Mux, agent: Mux, stalled: ReturnType<typeof newStalled>, o: ScenarioOptions) {
  const bound = <T>(p: Promise<T>, what: string) => within(p, o.timeoutMs, what);

  // 1. a stream nobody reads on the agent: it takes one window, then waits forever
  const stall = edge.open({ kind: "stall" } satisfies Meta);
  const stallData = randomBytes(100, o.initialWindow * 4);
  expect(stall.write(stallData)).toBe(false);

  // 2. the big transfer, the upload and the echoes, all at once
  const big = randomBytes(200, o.bigSize);
  const sink = edge.open({ kind: "sink" } satisfies Meta);
  const digest = readAll(sink);
  const sending = writeAll(sink, big);

  const source = edge.open({ kind: "source", size: o.upSize, seed: 300 } satisfies Meta);
  source.end(); // nothing to send that way
  const uploaded = readAll(source);

  const echoes = Array.from({ length: o.echoStreams }, (_, i) => {
    const data = randomBytes(400 + i, o.echoSize + i);
    const stream = edge.open({ kind: "echo" } satisfies Meta);
    return { data, back: readAll(stream), sent: writeAll(stream, data, 1000 + 37 * i) };
  });

  await bound(sending, "the big transfer to be written");
  expect(text(await bound(digest, "the agent's digest of the big transfer"))).toBe(sha256(big));
  expect(sha256(await bound(uploaded, "the agent's upload"))).toBe(sha256(randomBytes(300, o.upSize)));
  for (const [i, e] of echoes.entries()) {
    await bound(e.sent, `echo ${i} to be written`);
    const back = await bound(e.back, `echo ${i} to come back`);
    expect(back.byteLength).toBe(e.data.byteLength);
    expect(sha256(back)).toBe(sha256(e.data));
  }

  // 3. meanwhile the stalled stream got exactly one window and no more
  expect(stall.bytesSent).toBe(o.initialWindow);
  expect(stalled.received).toBe(o.initialWindow);
  expect(stall.isClosed).toBe(false);

  // 4. resetting it frees both ends
  stall.reset(WireError.CANCELLED);
  expect(await bound(stalled.reset.promise, "the stalled stream's reset to reach the agent")).toBe(WireError.CANCELLED);
  expect(edge.streamCount).toBe(0);
  expect(agent.streamCount).toBe(0);
  expect(edge.closed).toBe(false);
  expect(agent.closed).toBe(false);
}
