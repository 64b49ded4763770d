/** Frame codec: frames back to back in WebSocket messages. Pure: bytes in, values out. */
import {
  CONTROL_FRAMES,
  FIN_CARRIERS,
  FLAG_FIN,
  FRAME_NAMES,
  FrameType,
  HEADER_LENGTH,
  MAX_PAYLOAD,
  type FrameTypeValue,
} from "./wire.ts";

export interface Frame {
  type: FrameTypeValue;
  stream: number;
  payload: Uint8Array;
  /** FLAG_FIN was set: the sender half-closes with this frame. */
  fin: boolean;
}

/** A malformed or illegal frame: the connection ends with PROTOCOL_ERROR. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

export function encodeFrame(type: FrameTypeValue, stream: number, payload: Uint8Array = EMPTY, fin = false): Uint8Array {
  const out = new Uint8Array(HEADER_LENGTH + payload.byteLength);
  writeFrame(out, 0, type, stream, payload, fin);
  return out;
}

/** Writes a frame into `out` at `at` (which must have room); returns the bytes written. */
export function writeFrame(out: Uint8Array, at: number, type: FrameTypeValue, stream: number, payload: Uint8Array = EMPTY, fin = false): number {
  out[at] = fin ? type | FLAG_FIN : type;
  // big-endian u32s by hand: a DataView per frame shows up in profiles
  out[at + 1] = stream >>> 24;
  out[at + 2] = (stream >>> 16) & 0xff;
  out[at + 3] = (stream >>> 8) & 0xff;
  out[at + 4] = stream & 0xff;
  const n = payload.byteLength;
  out[at + 5] = n >>> 24;
  out[at + 6] = (n >>> 16) & 0xff;
  out[at + 7] = (n >>> 8) & 0xff;
  out[at + 8] = n & 0xff;
  if (n > 0) out.set(payload, at + HEADER_LENGTH);
  return HEADER_LENGTH + n;
}

/** Which type bytes (flag stripped) are frame types, and which of those belong to stream 0. */
const KNOWN_TYPE = new Uint8Array(128);
const CONTROL_TYPE = new Uint8Array(128);
const FIN_ALLOWED = new Uint8Array(128);
for (const t of Object.keys(FRAME_NAMES)) KNOWN_TYPE[Number(t)] = 1;
for (const t of CONTROL_FRAMES) CONTROL_TYPE[t] = 1;
for (const t of FIN_CARRIERS) FIN_ALLOWED[t] = 1;

/**
 * Reads every frame of a message, in order. Checks each header (type,
 * stream, length against MAX_PAYLOAD and against what is left of the
 * message) before looking at its payload; payloads are views into
 * `message`, not copies.
 */
export function decodeFrames(message: Uint8Array, onFrame: (frame: Frame) => void): void {
  let at = 0;
  if (message.byteLength === 0) throw new ProtocolError("empty message");
  while (at < message.byteLength) {
    const frame = readFrameAt(message, at);
    at += HEADER_LENGTH + frame.payload.byteLength;
    onFrame(frame);
  }
}

/** A message that holds exactly one frame. */
export function decodeFrame(message: Uint8Array): Frame {
  const frame = readFrameAt(message, 0);
  const extra = message.byteLength - HEADER_LENGTH - frame.payload.byteLength;
  if (extra !== 0) throw new ProtocolError(`${extra} bytes after the frame`);
  return frame;
}

function readFrameAt(m: Uint8Array, at: number): Frame {
  const left = m.byteLength - at;
  if (left < HEADER_LENGTH) throw new ProtocolError(`frame of ${left} bytes is shorter than its header`);
  const length = checkHeader(m, at);
  if (length > left - HEADER_LENGTH) throw new ProtocolError(`frame of ${length} bytes runs past the end of its message`);
  const raw = m[at]!;
  const start = at + HEADER_LENGTH;
  return { type: (raw & ~FLAG_FIN) as FrameTypeValue, stream: readU32At(m, at + 1), payload: m.subarray(start, start + length), fin: (raw & FLAG_FIN) !== 0 };
}

/**
 * Checks the header at `at` (`m` holds all HEADER_LENGTH bytes of it): a
 * known type, FIN only where it may be, stream 0 for control frames only, a
 * length within MAX_PAYLOAD. Returns the payload's length.
 */
export function checkHeader(m: Uint8Array, at: number): number {
  const raw = m[at]!;
  const type = raw & ~FLAG_FIN;
  if (KNOWN_TYPE[type] !== 1) throw new ProtocolError(`unknown frame type 0x${raw.toString(16)}`);
  if ((raw & FLAG_FIN) !== 0 && FIN_ALLOWED[type] !== 1) throw new ProtocolError(`${FRAME_NAMES[type]} frame cannot carry FIN`);
  const stream = readU32At(m, at + 1);
  if ((CONTROL_TYPE[type] === 1) !== (stream === 0)) throw new ProtocolError(`${FRAME_NAMES[type]} frame on stream ${stream}`);
  const length = readU32At(m, at + 5);
  if (length > MAX_PAYLOAD) throw new ProtocolError(`frame payload of ${length} bytes exceeds ${MAX_PAYLOAD}`);
  return length;
}

/** A big-endian u32 by hand: a DataView per frame shows up in profiles. */
export function readU32At(m: Uint8Array, at: number): number {
  return ((m[at]! << 24) | (m[at + 1]! << 16) | (m[at + 2]! << 8) | m[at + 3]!) >>> 0;
}

export function describeFrame(f: Frame): string {
  return `${FRAME_NAMES[f.type] ?? f.type}${f.fin ? "+FIN" : ""} stream=${f.stream} bytes=${f.payload.byteLength}`;
}

const EMPTY = new Uint8Array(0);
const encoder = new TextEncoder();
const decoder = new TextDecoder("utf-8", { fatal: true });

export const jsonPayload = (value: unknown) => encoder.encode(JSON.stringify(value));

export function parseJsonPayload(payload: Uint8Array, what: string): unknown {
  try {
    return JSON.parse(decoder.decode(payload));
  } catch {
    throw new ProtocolError(`${what} payload is not valid JSON`);
  }
}

export function u32Payload(n: number): Uint8Array {
  return new Uint8Array([n >>> 24, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff]);
}

export function readU32(payload: Uint8Array, what: string): number {
  if (payload.byteLength !== 4) throw new ProtocolError(`${what} payload must be 4 bytes, got ${payload.byteLength}`);
  // by hand, not a DataView: that needs payload.buffer, a slow path for a view into a read (`get buffer` in the edge's profile)
  return readU32At(payload, 0);
}

export const textPayload = (s: string) => encoder.encode(s);
export function readText(payload: Uint8Array): string {
  try {
    return decoder.decode(payload);
  } catch {
    return "";
  }
}

export { FrameType };
