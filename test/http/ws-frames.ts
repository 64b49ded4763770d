/** WebSocket frames (RFC 6455 §5.2) for tests: what a client (masked) or a server sends. */

export interface FrameSpec {
  opcode: number;
  payload: Uint8Array | string;
  /** Default true. */
  fin?: boolean;
  /** A client's frames are masked; a server's are not. */
  mask?: [number, number, number, number];
  rsv1?: boolean;
}

export function wsFrame(spec: FrameSpec): Uint8Array {
  const payload = typeof spec.payload === "string" ? new TextEncoder().encode(spec.payload) : spec.payload;
  const n = payload.byteLength;
  const lengthBytes = n < 126 ? 0 : n < 65536 ? 2 : 8;
  const out = new Uint8Array(2 + lengthBytes + (spec.mask ? 4 : 0) + n);
  out[0] = (spec.fin === false ? 0 : 0x80) | (spec.rsv1 ? 0x40 : 0) | spec.opcode;
  const view = new DataView(out.buffer);
  if (lengthBytes === 0) out[1] = n;
  else if (lengthBytes === 2) {
    out[1] = 126;
    view.setUint16(2, n);
  } else {
    out[1] = 127;
    view.setUint32(2, Math.floor(n / 2 ** 32));
    view.setUint32(6, n >>> 0);
  }
  let at = 2 + lengthBytes;
  if (spec.mask) {
    out[1]! |= 0x80;
    out.set(spec.mask, at);
    at += 4;
    for (let i = 0; i < n; i++) out[at + i] = payload[i]! ^ spec.mask[i & 3]!;
  } else {
    out.set(payload, at);
  }
  return out;
}

export const MASK: [number, number, number, number] = [0x37, 0xfa, 0x21, 0x3d];
