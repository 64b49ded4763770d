/**
 * The frame reader (src/http2/frame-reader.ts): frames out of reads cut
 * anywhere, DATA passed on in pieces without its padding, and a frame past
 * the size limit refused from its header alone.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { FrameReader, type FrameSink } from "../../src/http2/frame-reader.ts";
import { ConnectionError, ErrorCode, Flag, FrameType } from "../../src/http2/wire.ts";
import { data, frame, headers, literalBlock, ping, settings } from "../harness/h2-frames.ts";

/** What a reader handed on, DATA pieces joined per frame. */
class Recorder implements FrameSink {
  readonly seen: string[] = [];
  private piece = "";
  frame(type: number, flags: number, stream: number, payload: Uint8Array): void {
    this.seen.push(`${type}/${flags}/${stream}:${Buffer.from(payload).toString("hex")}`);
  }
  dataStart(stream: number, flags: number, length: number): void {
    this.piece = `data/${flags}/${stream}/${length}:`;
  }
  dataPiece(bytes: Uint8Array): void {
    expect(bytes.byteLength).toBeGreaterThan(0);
    this.piece += Buffer.from(bytes).toString("latin1");
  }
  dataEnd(): void {
    this.seen.push(this.piece);
  }
}

function padded(stream: number, content: string, pad: number, end = false): Uint8Array {
  return frame(FrameType.DATA, Flag.PADDED | (end ? Flag.END_STREAM : 0), stream, [pad, ...Buffer.from(content), ...new Array(pad).fill(0)]);
}

const stream = Buffer.concat([
  settings([[4, 1000]]),
  headers(1, literalBlock([[":method", "POST"]]), false),
  data(1, "hello "),
  padded(1, "padded world", 7),
  data(1, new Uint8Array(0)),
  ping(),
  padded(1, "", 3, true),
  frame(0xfa, 0, 0, [1, 2, 3]),
]);

function readAll(chunks: Uint8Array[]): string[] {
  const r = new Recorder();
  const reader = new FrameReader(r, 16_384);
  for (const c of chunks) reader.push(c);
  expect(reader.buffered).toBe(0);
  return r.seen;
}

describe("frame reader", () => {
  const whole = readAll([stream]);

  test("reads every frame of one read, DATA without its padding", () => {
    expect(whole.length).toBe(8);
    expect(whole[2]).toBe("data/0/1/6:hello ");
    expect(whole[3]).toBe("data/8/1/20:padded world");
    expect(whole[4]).toBe("data/0/1/0:");
    expect(whole[6]).toBe("data/9/1/4:");
    expect(whole[7]).toStartWith("250/0/0:");
  });

  test("reads the same whatever the reads cut (byte by byte, and at random)", () => {
    expect(readAll([...stream].map((b) => new Uint8Array([b])))).toEqual(whole);
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: stream.byteLength - 1 }), { maxLength: 12 }), (cuts) => {
        const at = [0, ...new Set(cuts.sort((a, b) => a - b)), stream.byteLength];
        const chunks = at.slice(1).map((end, i) => stream.subarray(at[i]!, end));
        expect(readAll(chunks)).toEqual(whole);
      }),
    );
  });

  test("a frame past the size limit is a FRAME_SIZE_ERROR from its header alone", () => {
    const reader = new FrameReader(new Recorder(), 16_384);
    const header = frame(FrameType.HEADERS, 0, 1, new Uint8Array(16_385)).subarray(0, 9);
    try {
      reader.push(header);
      throw new Error("not refused");
    } catch (err) {
      expect(err).toBeInstanceOf(ConnectionError);
      expect((err as ConnectionError).code).toBe(ErrorCode.FRAME_SIZE_ERROR);
    }
  });

  test("padding longer than its DATA frame is a PROTOCOL_ERROR", () => {
    const reader = new FrameReader(new Recorder(), 16_384);
    expect(() => reader.push(frame(FrameType.DATA, Flag.PADDED, 1, [10, 1, 2]))).toThrow(ConnectionError);
  });
});
