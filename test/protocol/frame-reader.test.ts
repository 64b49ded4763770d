/**
 * FrameReader: a byte stream cut anywhere (one byte at a time, inside a
 * header, across several frames, all at once) comes back out as runs of
 * whole frames, exactly the frames that were sent; a header that claims
 * more than MAX_PAYLOAD is refused before any of its payload is held.
 */
import { expect, test } from "bun:test";
import { decodeFrames, encodeFrame, ProtocolError, type Frame } from "../../src/protocol/frames.ts";
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { FrameType, HEADER_LENGTH, MAX_PAYLOAD, type FrameTypeValue } from "../../src/protocol/wire.ts";

/** A small deterministic PRNG (mulberry32): the same "random" stream on every run. */
function prng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1)) };
}

/** A frame as compared: its header fields, its payload's length and a hash of its bytes. */
interface Plain {
  type: number;
  stream: number;
  fin: boolean;
  length: number;
  hash: string;
}
const plain = (f: Frame): Plain => ({
  type: f.type,
  stream: f.stream,
  fin: f.fin,
  length: f.payload.byteLength,
  hash: new Bun.CryptoHasher("sha1").update(f.payload).digest("hex"),
});

/** Frames of every kind of size, concatenated, with what decodeFrames reads back from the whole. */
function frameStream(seed: number, count: number): { bytes: Uint8Array; frames: Plain[]; headerAt: number[] } {
  const r = prng(seed);
  const parts: Uint8Array[] = [];
  const sizes = () => {
    const pick = r.int(0, 9);
    if (pick <= 1) return 0;
    if (pick <= 5) return r.int(1, 40);
    if (pick <= 7) return r.int(41, 5_000);
    if (pick === 8) return r.int(5_001, 70_000);
    return MAX_PAYLOAD;
  };
  for (let i = 0; i < count; i++) {
    const size = sizes();
    const payload = new Uint8Array(size);
    for (let j = 0; j < size; j += 97) payload[j] = r.int(0, 255);
    if (size > 0) payload[size - 1] = r.int(0, 255);
    const kind = r.int(0, 3);
    const [type, stream, fin]: [FrameTypeValue, number, boolean] =
      kind === 0
        ? [FrameType.PING, 0, false]
        : kind === 1
          ? [FrameType.DATA, r.int(1, 2 ** 31 - 1), r.next() < 0.3]
          : kind === 2
            ? [FrameType.WINDOW, r.int(1, 1000), false]
            : [FrameType.RST, r.int(1, 1000), false];
    parts.push(encodeFrame(type, stream, size === 0 && type === FrameType.PING ? new Uint8Array(0) : payload, fin));
  }
  // always at least one of each extreme
  parts.push(encodeFrame(FrameType.DATA, 2, new Uint8Array(MAX_PAYLOAD).fill(7), true));
  parts.push(encodeFrame(FrameType.GOAWAY, 0));
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.byteLength, 0));
  const headerAt: number[] = [];
  let at = 0;
  for (const p of parts) {
    headerAt.push(at);
    bytes.set(p, at);
    at += p.byteLength;
  }
  const frames: Plain[] = [];
  decodeFrames(bytes, (f) => frames.push(plain(f)));
  return { bytes, frames, headerAt };
}

/** Feeds `bytes` cut at `cuts` (sorted offsets) into a reader; returns what it delivered and the most it held. */
function feed(bytes: Uint8Array, cuts: number[]): { frames: Plain[]; runs: number; maxBuffered: number; bufferedAtEnd: number } {
  const frames: Plain[] = [];
  let runs = 0;
  const reader = new FrameReader((run) => {
    runs++;
    // every run is whole frames: decodeFrames would throw on a cut one
    decodeFrames(run, (f) => frames.push(plain(f)));
  });
  let maxBuffered = 0;
  let from = 0;
  // every read lands in the same scratch memory, overwritten by the next: what the reader keeps of a
  // read past push() must be its own copy
  const scratch = new Uint8Array(bytes.byteLength);
  for (const wanted of [...cuts, bytes.byteLength]) {
    const cut = Math.min(wanted, bytes.byteLength);
    if (cut <= from) continue;
    scratch.set(bytes.subarray(from, cut));
    reader.push(scratch.subarray(0, cut - from));
    scratch.fill(0xee, 0, cut - from);
    maxBuffered = Math.max(maxBuffered, reader.buffered);
    from = cut;
  }
  return { frames, runs, maxBuffered, bufferedAtEnd: reader.buffered };
}

const stream = frameStream(0xb0220, 60);

test("the test stream has zero-length, small, large and maximum-size frames", () => {
  const sizes = stream.frames.map((f) => f.length);
  expect(sizes).toContain(0);
  expect(sizes).toContain(MAX_PAYLOAD);
  expect(sizes.some((s) => s > 0 && s < 50)).toBe(true);
  expect(sizes.some((s) => s > 5_000 && s < MAX_PAYLOAD)).toBe(true);
});

test("the whole stream in one read comes out as one run, a view of that read (no copy)", () => {
  const runs: Uint8Array[] = [];
  const reader = new FrameReader((run) => runs.push(run));
  const chunk = stream.bytes.slice();
  reader.push(chunk);
  expect(runs).toHaveLength(1);
  expect(runs[0]!.buffer).toBe(chunk.buffer);
  expect(runs[0]!.byteLength).toBe(chunk.byteLength);
  expect(reader.buffered).toBe(0);
});

test("one byte at a time gives exactly the frames sent, and holds at most one frame", () => {
  const cuts = Array.from({ length: stream.bytes.byteLength }, (_, i) => i + 1);
  const out = feed(stream.bytes, cuts);
  expect(out.frames).toEqual(stream.frames);
  expect(out.runs).toBe(stream.frames.length);
  expect(out.maxBuffered).toBeLessThanOrEqual(HEADER_LENGTH + MAX_PAYLOAD);
  expect(out.bufferedAtEnd).toBe(0);
});

test("cuts at every offset inside a header (1 to 8 bytes in) give exactly the frames sent", () => {
  for (let inside = 1; inside < HEADER_LENGTH; inside++) {
    const cuts = stream.headerAt.map((h) => h + inside);
    const out = feed(stream.bytes, cuts);
    expect({ inside, same: out.frames.length === stream.frames.length }).toEqual({ inside, same: true });
    expect(out.frames).toEqual(stream.frames);
    expect(out.bufferedAtEnd).toBe(0);
  }
});

test("a header split in two reads, then several frames and part of the next in one read", () => {
  // cut 4 bytes into frame 3's header, then take frames 3..6 whole plus 5 bytes of frame 7's header
  const h = stream.headerAt;
  const out = feed(stream.bytes, [h[3]! + 4, h[7]! + 5, h[7]! + HEADER_LENGTH + 1]);
  expect(out.frames).toEqual(stream.frames);
});

test("chaotic chunk sizes (1 byte to 600 KiB, many seeds) give exactly the frames sent, holding at most one frame", () => {
  for (let seed = 1; seed <= 40; seed++) {
    const r = prng(seed);
    const cuts: number[] = [];
    let at = 0;
    while (at < stream.bytes.byteLength) {
      const style = r.int(0, 4);
      at +=
        style === 0
          ? 1
          : style === 1
            ? r.int(1, HEADER_LENGTH)
            : style === 2
              ? r.int(HEADER_LENGTH, 300)
              : style === 3
                ? r.int(300, 70_000)
                : r.int(70_000, 600_000);
      cuts.push(at);
    }
    const out = feed(stream.bytes, cuts);
    expect({ seed, count: out.frames.length }).toEqual({ seed, count: stream.frames.length });
    expect(out.frames).toEqual(stream.frames);
    expect(out.maxBuffered).toBeLessThanOrEqual(HEADER_LENGTH + MAX_PAYLOAD);
    expect(out.bufferedAtEnd).toBe(0);
  }
});

test("a frame carried over from earlier reads comes out before the frames that follow it in the same read", () => {
  const a = encodeFrame(FrameType.DATA, 2, new Uint8Array([1, 2, 3, 4, 5]));
  const b = encodeFrame(FrameType.DATA, 4, new Uint8Array([6]));
  const c = encodeFrame(FrameType.PING, 0, new Uint8Array([9, 9, 9, 9]));
  const all = new Uint8Array([...a, ...b, ...c]);
  const order: number[] = [];
  const reader = new FrameReader((run) => decodeFrames(run, (f) => order.push(f.stream)));
  reader.push(all.subarray(0, 11)); // a's header and 2 bytes of its payload
  expect(order).toEqual([]);
  expect(reader.buffered).toBe(11);
  reader.push(all.subarray(11)); // the rest of a, b and c whole
  expect(order).toEqual([2, 4, 0]);
  expect(reader.buffered).toBe(0);
});

test("a zero-length frame whose header is split completes as soon as its header does", () => {
  const runs: Uint8Array[] = [];
  const reader = new FrameReader((run) => runs.push(run.slice()));
  const goaway = encodeFrame(FrameType.GOAWAY, 0);
  reader.push(goaway.subarray(0, 3));
  reader.push(goaway.subarray(3, 8));
  expect(runs).toHaveLength(0);
  expect(reader.buffered).toBe(8);
  reader.push(goaway.subarray(8));
  expect(runs).toEqual([goaway]);
  expect(reader.buffered).toBe(0);
});

/** A header (any type) whose length field says `length`. */
function headerClaiming(length: number): Uint8Array {
  const h = encodeFrame(FrameType.DATA, 2);
  new DataView(h.buffer).setUint32(5, length);
  return h;
}

test("exactly MAX_PAYLOAD is accepted; one byte more is refused from the header alone", () => {
  const ok = new FrameReader(() => {});
  expect(() => ok.push(headerClaiming(MAX_PAYLOAD))).not.toThrow();
  expect(ok.buffered).toBe(HEADER_LENGTH);

  const delivered: Uint8Array[] = [];
  const bad = new FrameReader((run) => delivered.push(run));
  expect(() => bad.push(headerClaiming(MAX_PAYLOAD + 1))).toThrow(ProtocolError);
  expect(delivered).toHaveLength(0);
  expect(bad.buffered).toBeLessThanOrEqual(HEADER_LENGTH);
});

test("an oversize length in a header split across reads is refused when the header completes, before any payload is held", () => {
  for (const length of [MAX_PAYLOAD + 1, 0xffffffff, 2 ** 31]) {
    for (let split = 1; split < HEADER_LENGTH; split++) {
      const delivered: Uint8Array[] = [];
      const reader = new FrameReader((run) => delivered.push(run));
      const header = headerClaiming(length);
      reader.push(header.subarray(0, split));
      expect(reader.buffered).toBe(split);
      // the rest of the header and a lot of "payload" in the same read
      const rest = new Uint8Array(HEADER_LENGTH - split + 100_000);
      rest.set(header.subarray(split));
      expect(() => reader.push(rest)).toThrow(/exceeds/);
      expect(delivered).toHaveLength(0);
      expect(reader.buffered).toBeLessThanOrEqual(HEADER_LENGTH);
    }
  }
});

test("an oversize header after good frames in the same read is refused, with nothing held for it", () => {
  const good = encodeFrame(FrameType.PING, 0, new Uint8Array([1, 2, 3, 4]));
  const reader = new FrameReader(() => {});
  const chunk = new Uint8Array([...good, ...headerClaiming(MAX_PAYLOAD + 1), 0, 0, 0]);
  expect(() => reader.push(chunk)).toThrow(ProtocolError);
  expect(reader.buffered).toBeLessThanOrEqual(HEADER_LENGTH);
});

test("a reader that refused keeps refusing: no later read revives it", () => {
  const delivered: Uint8Array[] = [];
  const reader = new FrameReader((run) => delivered.push(run));
  const header = headerClaiming(MAX_PAYLOAD + 1);
  reader.push(header.subarray(0, 6));
  expect(() => reader.push(header.subarray(6))).toThrow(ProtocolError);
  expect(() => reader.push(encodeFrame(FrameType.PING, 0, new Uint8Array(4)))).toThrow(ProtocolError);
  expect(delivered).toHaveLength(0);
});

// -- DATA frames passed on in pieces (deliverPiece) ------------------------------------------------

/**
 * What a mux makes of a frame sequence: DATA bytes run together per stream
 * until a FIN or another frame, every other frame as it is. A DATA frame
 * passed on in pieces reads the same as the whole frame.
 */
function logical(frames: Frame[]): (Plain | { data: number; fin: boolean; hash: string; length: number })[] {
  const out: (Plain | { data: number; fin: boolean; hash: string; length: number })[] = [];
  let run: { stream: number; parts: Uint8Array[]; fin: boolean } | undefined;
  const close = () => {
    if (!run) return;
    const bytes = Buffer.concat(run.parts);
    out.push({ data: run.stream, fin: run.fin, length: bytes.byteLength, hash: new Bun.CryptoHasher("sha1").update(bytes).digest("hex") });
    run = undefined;
  };
  for (const f of frames) {
    if (f.type !== FrameType.DATA) {
      close();
      out.push(plain(f));
      continue;
    }
    if (run && run.stream !== f.stream) close();
    run ??= { stream: f.stream, parts: [], fin: false };
    run.parts.push(f.payload.slice());
    if (f.fin) {
      run.fin = true;
      close();
    }
  }
  close();
  return out;
}

/** Feeds `bytes` cut at `cuts` into a reader that passes DATA on in pieces; each read lands in fresh memory. */
function feedPieces(bytes: Uint8Array, cuts: number[]) {
  const frames: Frame[] = [];
  let pieces = 0;
  let foreignPieces = 0;
  let current: Uint8Array | undefined;
  const reader = new FrameReader(
    (run) => decodeFrames(run, (f) => frames.push({ ...f, payload: f.payload.slice() })),
    (piece) => {
      pieces++;
      // a piece with bytes is a view of the read it came in, never a copy
      if (piece.payload.byteLength > 0 && piece.payload.buffer !== current!.buffer) foreignPieces++;
      frames.push({ ...piece, payload: piece.payload.slice() });
    },
  );
  let maxBuffered = 0;
  let from = 0;
  for (const wanted of [...cuts, bytes.byteLength]) {
    const cut = Math.min(wanted, bytes.byteLength);
    if (cut <= from) continue;
    current = bytes.slice(from, cut);
    reader.push(current);
    maxBuffered = Math.max(maxBuffered, reader.buffered);
    from = cut;
  }
  return { frames, pieces, foreignPieces, maxBuffered, bufferedAtEnd: reader.buffered };
}

const wholeFrames: Frame[] = [];
decodeFrames(stream.bytes, (f) => wholeFrames.push(f));

test("with pieces, chaotic chunk sizes give the same frames and the same bytes per stream, each piece a view of its read", () => {
  for (let seed = 1; seed <= 40; seed++) {
    const r = prng(seed * 7919);
    const cuts: number[] = [];
    let at = 0;
    while (at < stream.bytes.byteLength) {
      at += [1, r.int(1, HEADER_LENGTH), r.int(HEADER_LENGTH, 300), r.int(300, 70_000), r.int(70_000, 600_000)][r.int(0, 4)]!;
      cuts.push(at);
    }
    const out = feedPieces(stream.bytes, cuts);
    expect({ seed, same: logical(out.frames).length === logical(wholeFrames).length }).toEqual({ seed, same: true });
    expect(logical(out.frames)).toEqual(logical(wholeFrames));
    expect(out.foreignPieces).toBe(0);
    expect(out.maxBuffered).toBeLessThanOrEqual(HEADER_LENGTH + MAX_PAYLOAD);
    expect(out.bufferedAtEnd).toBe(0);
  }
});

test("a DATA frame cut by reads is passed on as its bytes come, holding nothing; the FIN goes with the last piece", () => {
  const payload = new Uint8Array(MAX_PAYLOAD).map((_, i) => i % 251);
  const frame = encodeFrame(FrameType.DATA, 6, payload, true);
  const pieces: Frame[] = [];
  const reader = new FrameReader(
    () => {
      throw new Error("no whole frame expected");
    },
    (piece) => pieces.push(piece),
  );
  reader.push(frame.subarray(0, 4)); // part of the header: held
  expect(reader.buffered).toBe(4);
  reader.push(frame.subarray(4, 1_000));
  reader.push(frame.subarray(1_000, 100_000));
  expect(reader.buffered).toBe(0);
  reader.push(frame.subarray(100_000));
  expect(pieces.map((p) => [p.stream, p.payload.byteLength, p.fin])).toEqual([
    [6, 1_000 - HEADER_LENGTH, false],
    [6, 99_000, false],
    [6, frame.byteLength - 100_000, true],
  ]);
  expect(Buffer.concat(pieces.map((p) => p.payload)).equals(payload)).toBe(true);
});

test("an empty DATA frame with FIN whose header is cut comes out as one empty piece carrying the FIN", () => {
  const pieces: Frame[] = [];
  const reader = new FrameReader(() => {}, (piece) => pieces.push(piece));
  const fin = encodeFrame(FrameType.DATA, 8, new Uint8Array(0), true);
  reader.push(fin.subarray(0, 5));
  expect(pieces).toHaveLength(0);
  reader.push(fin.subarray(5));
  expect(pieces.map((p) => [p.type, p.stream, p.payload.byteLength, p.fin])).toEqual([[FrameType.DATA, 8, 0, true]]);
  expect(reader.buffered).toBe(0);
});

test("with pieces, a frame other than DATA cut by reads is still gathered whole", () => {
  const runs: Uint8Array[] = [];
  const reader = new FrameReader((run) => runs.push(run.slice()), () => {
    throw new Error("no piece expected");
  });
  const open = encodeFrame(FrameType.OPEN, 2, new TextEncoder().encode(JSON.stringify({ tunnel: 1, pad: "x".repeat(5_000) })));
  reader.push(open.subarray(0, 3));
  reader.push(open.subarray(3, 2_000));
  expect(reader.buffered).toBe(2_000);
  reader.push(open.subarray(2_000));
  expect(runs).toEqual([open]);
});

test("the header of a DATA frame cut by reads is checked before any piece: stream 0 and an oversize length are refused, and stay refused", () => {
  const onStream0 = encodeFrame(FrameType.DATA, 0, new Uint8Array(100));
  const oversize = headerClaiming(MAX_PAYLOAD + 1);
  for (const bad of [onStream0, new Uint8Array([...oversize, ...new Uint8Array(100)])]) {
    const pieces: Frame[] = [];
    const reader = new FrameReader(() => {}, (piece) => pieces.push(piece));
    reader.push(bad.subarray(0, HEADER_LENGTH - 2));
    expect(() => reader.push(bad.subarray(HEADER_LENGTH - 2, HEADER_LENGTH + 10))).toThrow(ProtocolError);
    expect(() => reader.push(bad.subarray(HEADER_LENGTH + 10))).toThrow(ProtocolError);
    expect(pieces).toHaveLength(0);
  }
});
