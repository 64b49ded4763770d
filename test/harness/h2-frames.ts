/**
 * HTTP/2 frames made and read by hand, for tests that play a client byte
 * by byte (test/http2/, test/security/http2-*): frame builders, header
 * blocks of plain literals (no HPACK table, no Huffman: nothing of the
 * engine's own coding is used to test it), and a reader of what the server
 * sends, its header blocks decoded.
 */
import { HpackDecoder } from "../../src/http2/hpack-decoder.ts";
import { Flag, FRAME_HEADER_LENGTH, FrameType, PREFACE } from "../../src/http2/wire.ts";

export { ErrorCode, Flag, FrameType, PREFACE, Setting } from "../../src/http2/wire.ts";

export interface Frame {
  type: number;
  flags: number;
  stream: number;
  payload: Uint8Array;
}

/** One frame's bytes. */
export function frame(type: number, flags: number, stream: number, payload: Uint8Array | number[] = []): Uint8Array {
  const body = payload instanceof Uint8Array ? payload : new Uint8Array(payload);
  const out = new Uint8Array(FRAME_HEADER_LENGTH + body.byteLength);
  out[0] = body.byteLength >>> 16;
  out[1] = (body.byteLength >>> 8) & 0xff;
  out[2] = body.byteLength & 0xff;
  out[3] = type;
  out[4] = flags;
  new DataView(out.buffer).setUint32(5, stream >>> 0);
  out.set(body, FRAME_HEADER_LENGTH);
  return out;
}

/** The 32-bit number at `at` in `bytes`. */
export function u32At(bytes: Uint8Array, at = 0): number {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength).getUint32(at);
}

export function u32(n: number): number[] {
  return [(n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff];
}

export function settings(pairs: [number, number][] = []): Uint8Array {
  return frame(FrameType.SETTINGS, 0, 0, pairs.flatMap(([id, v]) => [id >> 8, id & 0xff, ...u32(v)]));
}
export const settingsAck = (): Uint8Array => frame(FrameType.SETTINGS, Flag.ACK, 0);
export const ping = (ack = false, opaque = [1, 2, 3, 4, 5, 6, 7, 8]): Uint8Array => frame(FrameType.PING, ack ? Flag.ACK : 0, 0, opaque);
export const windowUpdate = (stream: number, increment: number): Uint8Array => frame(FrameType.WINDOW_UPDATE, 0, stream, u32(increment));
export const rstStream = (stream: number, code: number): Uint8Array => frame(FrameType.RST_STREAM, 0, stream, u32(code));
export const goaway = (last: number, code: number): Uint8Array => frame(FrameType.GOAWAY, 0, 0, [...u32(last), ...u32(code)]);
export const data = (stream: number, bytes: Uint8Array | string, end = false): Uint8Array =>
  frame(FrameType.DATA, end ? Flag.END_STREAM : 0, stream, typeof bytes === "string" ? new TextEncoder().encode(bytes) : bytes);

/** `bytes` as DATA frames of at most 16,384 bytes (the default largest frame); the last one ends the stream when `end`. */
export function dataFrames(stream: number, bytes: Uint8Array, end = false): Uint8Array {
  const frames: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength || frames.length === 0; at += 16_384) {
    const part = bytes.subarray(at, at + 16_384);
    frames.push(data(stream, part, end && at + 16_384 >= bytes.byteLength));
  }
  return Buffer.concat(frames);
}

/** A header block of literals without indexing, new names, raw strings (RFC 7541 §6.2.2). */
export function literalBlock(fields: [string, string][]): Uint8Array {
  const out: number[] = [];
  const int = (prefixFlags: number, mask: number, n: number) => {
    if (n < mask) return void out.push(prefixFlags | n);
    out.push(prefixFlags | mask);
    n -= mask;
    while (n >= 128) {
      out.push((n % 128) | 0x80);
      n = Math.floor(n / 128);
    }
    out.push(n);
  };
  const str = (s: string) => {
    int(0x00, 0x7f, s.length);
    for (let i = 0; i < s.length; i++) out.push(s.charCodeAt(i) & 0xff);
  };
  for (const [name, value] of fields) {
    out.push(0x00);
    str(name);
    str(value);
  }
  return new Uint8Array(out);
}

/** A GET's fields (plus `extra`). */
export function getFields(path = "/", extra: [string, string][] = []): [string, string][] {
  return [[":method", "GET"], [":scheme", "http"], [":authority", "h2.localhost"], [":path", path], ...extra];
}

/** HEADERS carrying a whole block. */
export function headers(stream: number, fields: [string, string][] | Uint8Array, endStream = true, endHeaders = true): Uint8Array {
  const block = fields instanceof Uint8Array ? fields : literalBlock(fields);
  return frame(FrameType.HEADERS, (endStream ? Flag.END_STREAM : 0) | (endHeaders ? Flag.END_HEADERS : 0), stream, block);
}

/** The client's preface and its (empty) SETTINGS. */
export function clientPreface(pairs: [number, number][] = []): Uint8Array {
  return Buffer.concat([PREFACE, settings(pairs)]);
}

/**
 * Reads what a server sends: frames out of bytes as they come, header
 * blocks (HEADERS + CONTINUATION) decoded with an HPACK decoder of its own.
 */
export class ServerFrames {
  readonly frames: Frame[] = [];
  /** Header blocks decoded, with their stream, in order. */
  readonly heads: { stream: number; fields: [string, string][]; endStream: boolean }[] = [];
  private buf = new Uint8Array(0);
  private readonly decoder = new HpackDecoder();
  private block: { stream: number; parts: Uint8Array[]; endStream: boolean } | undefined;

  push(bytes: Uint8Array): void {
    const buf = Buffer.concat([this.buf, bytes]);
    const view = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
    // frames are read at an offset and the rest kept once: a chunk of thousands of small frames costs its length, not its length squared
    let at = 0;
    while (buf.byteLength - at >= FRAME_HEADER_LENGTH) {
      const length = (buf[at]! << 16) | (buf[at + 1]! << 8) | buf[at + 2]!;
      if (buf.byteLength - at < FRAME_HEADER_LENGTH + length) break;
      const f: Frame = {
        type: buf[at + 3]!,
        flags: buf[at + 4]!,
        stream: view.getUint32(at + 5) & 0x7fffffff,
        payload: buf.slice(at + FRAME_HEADER_LENGTH, at + FRAME_HEADER_LENGTH + length),
      };
      at += FRAME_HEADER_LENGTH + length;
      this.frames.push(f);
      this.headerBlocks(f);
    }
    this.buf = buf.subarray(at);
  }

  private headerBlocks(f: Frame): void {
    if (f.type === FrameType.HEADERS) this.block = { stream: f.stream, parts: [f.payload], endStream: (f.flags & Flag.END_STREAM) !== 0 };
    else if (f.type === FrameType.CONTINUATION) this.block?.parts.push(f.payload);
    else return;
    if (!(f.flags & Flag.END_HEADERS) || !this.block) return;
    const fields: [string, string][] = [];
    this.decoder.decode(Buffer.concat(this.block.parts), 1 << 30, { field: (n, v) => void fields.push([n, v]) });
    this.heads.push({ stream: this.block.stream, fields, endStream: this.block.endStream });
    this.block = undefined;
  }

  of(type: number): Frame[] {
    return this.frames.filter((f) => f.type === type);
  }

  /** The GOAWAY's error code, or undefined when none came. */
  get goawayCode(): number | undefined {
    const g = this.of(FrameType.GOAWAY).at(-1);
    return g ? u32At(g.payload, 4) : undefined;
  }

  /** RST_STREAM codes by stream. */
  resets(): Map<number, number> {
    return new Map(this.of(FrameType.RST_STREAM).map((f) => [f.stream, u32At(f.payload)]));
  }

  /** A stream's DATA, concatenated, as text. */
  body(stream: number): string {
    return Buffer.concat(this.of(FrameType.DATA).filter((f) => f.stream === stream).map((f) => f.payload)).toString("latin1");
  }

  status(stream: number): string | undefined {
    return this.heads.find((h) => h.stream === stream && h.fields.some(([n]) => n === ":status"))?.fields.find(([n]) => n === ":status")?.[1];
  }
}
