/** Frame codec: one frame per WebSocket message. Pure: bytes in, values out. */
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
  out[0] = fin ? type | FLAG_FIN : type;
  new DataView(out.buffer).setUint32(1, stream);
  out.set(payload, HEADER_LENGTH);
  return out;
}

/**
 * Reads one message. Checks type, stream and length before looking at the
 * payload; the payload is a view into `message`, not a copy.
 */
export function decodeFrame(message: Uint8Array): Frame {
  if (message.byteLength < HEADER_LENGTH) throw new ProtocolError(`frame of ${message.byteLength} bytes is shorter than its header`);
  if (message.byteLength - HEADER_LENGTH > MAX_PAYLOAD) {
    throw new ProtocolError(`frame payload of ${message.byteLength - HEADER_LENGTH} bytes exceeds ${MAX_PAYLOAD}`);
  }
  const raw = message[0]!;
  const type = raw & ~FLAG_FIN;
  const fin = (raw & FLAG_FIN) !== 0;
  if (!(type in FRAME_NAMES)) throw new ProtocolError(`unknown frame type 0x${raw.toString(16)}`);
  if (fin && !FIN_CARRIERS.has(type)) throw new ProtocolError(`${FRAME_NAMES[type]} frame cannot carry FIN`);
  const stream = new DataView(message.buffer, message.byteOffset, message.byteLength).getUint32(1);
  if (CONTROL_FRAMES.has(type) !== (stream === 0)) {
    throw new ProtocolError(`${FRAME_NAMES[type]} frame on stream ${stream}`);
  }
  return { type: type as FrameTypeValue, stream, payload: message.subarray(HEADER_LENGTH), fin };
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
  const out = new Uint8Array(4);
  new DataView(out.buffer).setUint32(0, n);
  return out;
}

export function readU32(payload: Uint8Array, what: string): number {
  if (payload.byteLength !== 4) throw new ProtocolError(`${what} payload must be 4 bytes, got ${payload.byteLength}`);
  return new DataView(payload.buffer, payload.byteOffset, 4).getUint32(0);
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
