/**
 * Properties of the pure decoders, whatever bytes a peer sends: FrameReader
 * (the direct port's byte stream back into runs of whole frames),
 * decodeFrames (the frames of one message) and the JSON of control
 * frames. Hostile
 * bytes give frames or a ProtocolError, never another error, never a loop,
 * and never more memory than one largest frame.
 *
 * FUZZ_SEED=<seed> replays a failure fast-check reported; FUZZ_RUNS_SCALE=10
 * runs ten times as many cases.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import * as v from "valibot";
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { decodeFrames, encodeFrame, parseJsonPayload, ProtocolError, type Frame } from "../../src/protocol/frames.ts";
import { Hello, OpenMeta, readOpenMeta, TunnelRequest } from "../../src/protocol/messages.ts";
import { CONTROL_FRAMES, FIN_CARRIERS, FrameType, HEADER_LENGTH, MAX_PAYLOAD, type FrameTypeValue } from "../../src/protocol/wire.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const TIME_LIMIT_MS = 10_000;
const RUNS = 300;
/** The most a FrameReader may hold: one largest frame, header included. */
const MAX_HELD = HEADER_LENGTH + MAX_PAYLOAD;

// -- generators --------------------------------------------------------------------------------

const TYPES = Object.values(FrameType) as FrameTypeValue[];

/** Stream ids where the edge cases are: 0, the first few, the top of the range, anything. */
const streamId = fc.oneof(
  { arbitrary: fc.constantFrom(0, 1, 2, 3, 4, 0x7fff_ffff, 0x8000_0000, 0xffff_ffff), weight: 3 },
  { arbitrary: fc.integer({ min: 0, max: 0xffff_ffff }), weight: 1 },
);

/** A payload of `size` bytes made from `seed`: cheap even at MAX_PAYLOAD (fc.uint8Array is not). */
function filled(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i++) out[i] = (seed + i * 131 + (i >>> 8) * 7) & 0xff;
  return out;
}

const payloadSize = fc.oneof(
  { arbitrary: fc.integer({ min: 0, max: 64 }), weight: 6 },
  { arbitrary: fc.integer({ min: 65, max: 5_000 }), weight: 3 },
  { arbitrary: fc.integer({ min: 5_001, max: 70_000 }), weight: 1 },
  { arbitrary: fc.constantFrom(MAX_PAYLOAD - 1, MAX_PAYLOAD), weight: 1 },
);

/** A frame the codec accepts: a known type on the stream its kind belongs to, FIN only where it may be. */
const validFrame: fc.Arbitrary<Frame> = fc
  .record({ type: fc.constantFrom(...TYPES), stream: fc.integer({ min: 1, max: 0xffff_ffff }), fin: fc.boolean(), size: payloadSize, seed: fc.nat(255) })
  .map(({ type, stream, fin, size, seed }) => ({
    type,
    stream: CONTROL_FRAMES.has(type) ? 0 : stream,
    fin: fin && FIN_CARRIERS.has(type),
    payload: filled(size, seed),
  }));

const encode = (f: Frame) => encodeFrame(f.type, f.stream, f.payload, f.fin);

function concat(parts: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/**
 * Something that looks like a frame to a reader that trusts it: any type
 * byte, any stream, a declared length near the interesting values (the real
 * length, small, MAX_PAYLOAD and one past it, the top of u32), and a body of
 * whatever length, which need not match.
 */
const frameish: fc.Arbitrary<Uint8Array> = fc
  .record({
    type: fc.oneof(fc.constantFrom(...TYPES.flatMap((t) => [t, t | 0x80])), fc.nat(255)),
    stream: streamId,
    body: fc.uint8Array({ maxLength: 64 }),
    length: fc.oneof(
      fc.constant(-1), // the body's real length
      fc.integer({ min: 0, max: 80 }),
      fc.constantFrom(MAX_PAYLOAD, MAX_PAYLOAD + 1, 0xffff_ffff, 0x8000_0000),
      fc.integer({ min: 0, max: 0xffff_ffff }),
    ),
  })
  .map(({ type, stream, body, length }) => {
    const out = new Uint8Array(HEADER_LENGTH + body.byteLength);
    const view = new DataView(out.buffer);
    out[0] = type;
    view.setUint32(1, stream);
    view.setUint32(5, length === -1 ? body.byteLength : length);
    out.set(body, HEADER_LENGTH);
    return out;
  });

/** Random bytes, or frame-like pieces, or valid frames, back to back. */
const hostileBytes: fc.Arbitrary<Uint8Array> = fc
  .array(fc.oneof(fc.uint8Array({ minLength: 1, maxLength: 48 }), frameish, validFrame.map(encode)), { minLength: 1, maxLength: 12 })
  .map(concat);

/** `bytes` cut at random places, empty reads included: how TCP may deliver them. */
function cutAt(bytes: Uint8Array, cuts: number[], empties: boolean): Uint8Array[] {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  const chunks: Uint8Array[] = [];
  let from = 0;
  for (const p of points) {
    chunks.push(bytes.subarray(from, p));
    from = p;
  }
  chunks.push(bytes.subarray(from));
  return empties ? chunks : chunks.filter((c) => c.byteLength > 0);
}
const cuts = fc.record({ cuts: fc.array(fc.nat(), { maxLength: 24 }), empties: fc.boolean() });

/** A byte stream with some of these done to it: bytes flipped, cut short, duplicated, deleted, inserted, a length rewritten. */
type Mutation =
  | { kind: "flip"; at: number; mask: number }
  | { kind: "truncate"; at: number }
  | { kind: "duplicate"; at: number; length: number; to: number }
  | { kind: "delete"; at: number; length: number }
  | { kind: "insert"; at: number; bytes: Uint8Array }
  | { kind: "length"; at: number; value: number };

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ kind: fc.constant("flip" as const), at: fc.nat(), mask: fc.integer({ min: 1, max: 255 }) }),
  fc.record({ kind: fc.constant("truncate" as const), at: fc.nat() }),
  fc.record({ kind: fc.constant("duplicate" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 40 }), to: fc.nat() }),
  fc.record({ kind: fc.constant("delete" as const), at: fc.nat(), length: fc.integer({ min: 1, max: 12 }) }),
  fc.record({ kind: fc.constant("insert" as const), at: fc.nat(), bytes: fc.uint8Array({ minLength: 1, maxLength: 12 }) }),
  fc.record({ kind: fc.constant("length" as const), at: fc.nat(), value: fc.integer({ min: 0, max: 0xffff_ffff }) }),
);

function mutate(input: Uint8Array, mutations: Mutation[]): Uint8Array {
  let b: Uint8Array = input.slice();
  for (const m of mutations) {
    const at = b.byteLength === 0 ? 0 : m.at % b.byteLength;
    switch (m.kind) {
      case "flip":
        if (b.byteLength > 0) b[at] = b[at]! ^ m.mask;
        break;
      case "truncate":
        b = b.subarray(0, at);
        break;
      case "duplicate": {
        const piece = b.slice(at, at + m.length);
        const to = m.to % (b.byteLength + 1);
        b = concat([b.subarray(0, to), piece, b.subarray(to)]);
        break;
      }
      case "delete":
        b = concat([b.subarray(0, at), b.subarray(at + m.length)]);
        break;
      case "insert":
        b = concat([b.subarray(0, at), m.bytes, b.subarray(at)]);
        break;
      case "length":
        // where a header's length would be if a frame started here
        if (at + 9 <= b.byteLength) new DataView(b.buffer, b.byteOffset).setUint32(at + 5, m.value);
        break;
    }
  }
  return b;
}

// -- what a peer's bytes come to -----------------------------------------------------------------

interface Outcome {
  frames: Frame[];
  /** The error that ended the stream, if one did. */
  error?: unknown;
  /** Index of the read that threw. */
  threwAt?: number;
}

/**
 * Feeds the reads to a FrameReader whose runs go to decodeFrames, as the
 * edge's direct port does (there, Mux.receive), and checks on every read
 * that nothing is lost or held twice and that no more than one largest
 * frame is held. Each run must be whole frames by their lengths.
 */
function readStream(chunks: Uint8Array[]): Outcome {
  const frames: Frame[] = [];
  let pushed = 0;
  let delivered = 0;
  const reader = new FrameReader((run) => {
    expect(run.byteLength).toBeGreaterThan(0);
    expect(wholeFrames(run)).toBe(true);
    delivered += run.byteLength;
    decodeFrames(run, (f) => frames.push({ ...f, payload: f.payload.slice() }));
  });
  for (let i = 0; i < chunks.length; i++) {
    try {
      reader.push(chunks[i]!);
    } catch (error) {
      return { frames, error, threwAt: i };
    }
    pushed += chunks[i]!.byteLength;
    // every byte read is either passed on or held, once; so each read makes progress
    expect(delivered + reader.buffered).toBe(pushed);
    expect(reader.buffered).toBeLessThanOrEqual(MAX_HELD);
  }
  return { frames };
}

/** The run is a sequence of headers and payloads that ends exactly at its end. */
function wholeFrames(run: Uint8Array): boolean {
  const view = new DataView(run.buffer, run.byteOffset, run.byteLength);
  let at = 0;
  while (at + HEADER_LENGTH <= run.byteLength) {
    const length = view.getUint32(at + 5);
    if (length > MAX_PAYLOAD) return false;
    at += HEADER_LENGTH + length;
  }
  return at === run.byteLength;
}

function decodeAll(message: Uint8Array): Outcome {
  const frames: Frame[] = [];
  try {
    decodeFrames(message, (f) => frames.push(f));
    return { frames };
  } catch (error) {
    return { frames, error };
  }
}

function expectProtocolErrorOnly(outcome: Outcome): void {
  if (outcome.error === undefined) return;
  if (!(outcome.error instanceof ProtocolError)) throw new Error(`threw ${String(outcome.error)}, not a ProtocolError`);
}

const same = (a: Frame[], b: Frame[]) => {
  expect(a.map((f) => [f.type, f.stream, f.fin, f.payload.byteLength])).toEqual(b.map((f) => [f.type, f.stream, f.fin, f.payload.byteLength]));
  for (let i = 0; i < a.length; i++) expect(Buffer.compare(a[i]!.payload, b[i]!.payload)).toBe(0);
};

// -- frames ------------------------------------------------------------------------------------

describe("FrameReader and decodeFrames", () => {
  test("any bytes, read in any pieces, give frames or a ProtocolError: never another error, never a byte lost or held twice", () => {
    fc.assert(
      fc.property(hostileBytes, cuts, (bytes, c) => {
        const outcome = readStream(cutAt(bytes, c.cuts, c.empties));
        expectProtocolErrorOnly(outcome);
        expectProtocolErrorOnly(decodeAll(bytes));
        // the frames that came out re-encode to exactly the bytes they came from, from the start:
        // nothing skipped, reordered or invented from half a header
        const again = concat(outcome.frames.map(encode));
        expect(Buffer.compare(again, bytes.subarray(0, again.byteLength))).toBe(0);
      }),
      fuzzParams(RUNS * 2, TIME_LIMIT_MS),
    );
  });

  test("valid frames cut anywhere (chunked chaotically) come out the same, and so does the whole as one message", () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 16 }), cuts, (frames, c) => {
        const bytes = concat(frames.map(encode));
        const outcome = readStream(cutAt(bytes, c.cuts, c.empties));
        expect(outcome.error).toBeUndefined();
        same(outcome.frames, frames);
        const whole = decodeAll(bytes);
        expect(whole.error).toBeUndefined();
        same(whole.frames, frames);
      }),
      fuzzParams(RUNS, TIME_LIMIT_MS),
    );
  });

  test("a header announcing more than MAX_PAYLOAD is refused on the read that completes it, before any of its payload", () => {
    const oversized = fc.record({
      before: fc.array(validFrame, { maxLength: 4 }),
      type: fc.nat(255),
      stream: streamId,
      length: fc.oneof(fc.constant(MAX_PAYLOAD + 1), fc.integer({ min: MAX_PAYLOAD + 1, max: 0xffff_ffff })),
      after: fc.integer({ min: 0, max: 200 }),
    });
    fc.assert(
      fc.property(oversized, cuts, ({ before, type, stream, length, after }, c) => {
        const header = new Uint8Array(HEADER_LENGTH);
        header[0] = type;
        new DataView(header.buffer).setUint32(1, stream);
        new DataView(header.buffer).setUint32(5, length);
        const prefix = concat(before.map(encode));
        const bytes = concat([prefix, header, filled(after, 1)]);
        const chunks = cutAt(bytes, c.cuts, false);
        // the read that brings the header's last byte
        let end = 0;
        const completing = chunks.findIndex((chunk) => (end += chunk.byteLength) >= prefix.byteLength + HEADER_LENGTH);
        const outcome = readStream(chunks);
        expect(outcome.error).toBeInstanceOf(ProtocolError);
        expect((outcome.error as Error).message).toContain("exceeds");
        expect(outcome.threwAt).toBe(completing);
        // the frames before it were whole and valid: those that came in earlier reads were passed on
        expect(outcome.frames.length).toBeLessThanOrEqual(before.length);
      }),
      fuzzParams(RUNS, TIME_LIMIT_MS),
    );
  });

  test("a message with such a header is refused from the header, however little of the payload follows", () => {
    fc.assert(
      fc.property(
        fc.array(validFrame, { maxLength: 3 }),
        fc.constantFrom(...TYPES),
        fc.integer({ min: MAX_PAYLOAD + 1, max: 0xffff_ffff }),
        fc.integer({ min: 0, max: 64 }),
        (before, type, length, after) => {
          const header = encodeFrame(type, CONTROL_FRAMES.has(type) ? 0 : 2);
          new DataView(header.buffer).setUint32(5, length);
          const outcome = decodeAll(concat([...before.map(encode), header, filled(after, 3)]));
          expect(outcome.error).toBeInstanceOf(ProtocolError);
          expect((outcome.error as Error).message).toContain("exceeds");
          expect(outcome.frames).toHaveLength(before.length);
        },
      ),
      fuzzParams(RUNS, TIME_LIMIT_MS),
    );
  });

  test("valid frame streams with bytes flipped, cut short, duplicated, deleted, inserted or a length rewritten give frames or a ProtocolError", () => {
    fc.assert(
      fc.property(fc.array(validFrame, { minLength: 1, maxLength: 8 }), fc.array(mutation, { minLength: 1, maxLength: 6 }), cuts, (frames, mutations, c) => {
        const bytes = mutate(concat(frames.map(encode)), mutations);
        expectProtocolErrorOnly(readStream(cutAt(bytes, c.cuts, c.empties)));
        if (bytes.byteLength > 0) expectProtocolErrorOnly(decodeAll(bytes));
      }),
      fuzzParams(RUNS, TIME_LIMIT_MS),
    );
  });
});

// -- JSON of control frames ----------------------------------------------------------------------

/** Any bytes as a payload: JSON or not, UTF-8 or not. */
const jsonishBytes = fc.oneof(
  fc.uint8Array({ maxLength: 80 }),
  fc.json({ maxDepth: 4 }).map((s) => new TextEncoder().encode(s)),
  fc.string({ unit: "binary", maxLength: 60 }).map((s) => new TextEncoder().encode(s)),
);

/** Mostly `valid`, sometimes anything at all: so that objects get past their first field often enough to test the rest. */
const mostly = <T,>(valid: fc.Arbitrary<T>) => fc.oneof({ arbitrary: valid as fc.Arbitrary<unknown>, weight: 12 }, { arbitrary: fc.anything(), weight: 1 });
const shortString = (max: number) => fc.string({ unit: "binary", maxLength: max });

/** Objects shaped like a HELLO, each field valid, nearly valid or anything at all. */
const helloFields = {
    version: mostly(fc.constantFrom(1, 0, 2, -1, 1.5, 1e300)),
    token: mostly(fc.oneof(shortString(60), fc.string({ maxLength: 600 }))),
    tunnels: mostly(
      // 1-3 tunnels mostly; the schema's bounds (1..16) are crossed by `mostly`'s anything and the empty/long arrays below
      fc.oneof(fc.constant([]), fc.array(fc.record({ protocol: fc.constant("http") }), { minLength: 16, maxLength: 17 }), fc.array(
        mostly(
          fc.oneof(
            fc.record(
              { protocol: fc.constantFrom("http", "HTTP", "tcp"), subdomain: mostly(fc.oneof(shortString(12), shortString(300))), skipWarning: mostly(fc.boolean()) },
              { requiredKeys: ["protocol"] },
            ),
            fc.record({ protocol: fc.constant("tcp"), port: mostly(fc.oneof(fc.integer({ min: -1, max: 70_000 }), fc.double())) }, { requiredKeys: ["protocol"] }),
          ),
        ),
        { minLength: 1, maxLength: 3 },
      )),
    ),
    proxy: mostly(fc.boolean()),
    resume: mostly(shortString(80)),
    agent: mostly(shortString(120)),
    direct: mostly(fc.boolean()),
};
/** Mostly with the three required fields, sometimes with any of the fields missing. */
const helloish = fc.oneof(
  { arbitrary: fc.record(helloFields, { requiredKeys: ["version", "token", "tunnels"] }), weight: 3 },
  { arbitrary: fc.record(helloFields, { requiredKeys: [] }), weight: 1 },
);

/** Objects shaped like OPEN metadata, for the hand-written check against its schema. */
const openMetaish = fc.record(
  {
    tunnel: mostly(shortString(10)),
    kind: mostly(fc.constantFrom("h1", "http", "ws", "tcp", "udp")),
    remote: mostly(shortString(20)),
    head: mostly(fc.oneof(shortString(60), fc.constant("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))),
  },
  { requiredKeys: [] },
);

const anyValue = fc.oneof(
  fc.anything({ withNullPrototype: true, withBoxedValues: true, withMap: true, withSet: true, withSparseArray: true }),
  fc.jsonValue(),
  helloish,
  openMetaish,
);

describe("JSON control payloads", () => {
  test("any payload through parseJsonPayload and the Hello schema: a value or a ProtocolError, and safeParse never throws", () => {
    fc.assert(
      fc.property(jsonishBytes, (payload) => {
        let value: unknown;
        try {
          value = parseJsonPayload(payload, "HELLO");
        } catch (err) {
          expect(err).toBeInstanceOf(ProtocolError);
          return;
        }
        v.safeParse(Hello, value);
        v.safeParse(TunnelRequest, value);
      }),
      fuzzParams(RUNS * 2, TIME_LIMIT_MS),
    );
  });

  test("any value, HELLO-shaped or not: the schemas and the hand-written checks never throw, and the checks are never looser than the schemas", () => {
    fc.assert(
      fc.property(anyValue, (value) => {
        const hello = v.safeParse(Hello, value);
        if (hello.success) {
          // what the edge relies on after the check
          expect(typeof hello.output.token).toBe("string");
          expect(hello.output.tunnels.length).toBeGreaterThanOrEqual(1);
        }
        // the per-request fast paths accept only what the schemas accept
        if (readOpenMeta(value) !== undefined) expect(v.safeParse(OpenMeta, value).success).toBe(true);
      }),
      fuzzParams(RUNS * 2, TIME_LIMIT_MS),
    );
  });

  test("HELLO-shaped JSON sent as bytes: parsed and checked without any error but a ProtocolError", () => {
    fc.assert(
      fc.property(helloish, (value) => {
        let text: string | undefined;
        try {
          text = JSON.stringify(value);
        } catch {
          return; // not representable as JSON (a BigInt): no peer can send it
        }
        if (text === undefined) return;
        const parsed = parseJsonPayload(new TextEncoder().encode(text), "HELLO");
        v.safeParse(Hello, parsed);
      }),
      fuzzParams(RUNS, TIME_LIMIT_MS),
    );
  });
});
