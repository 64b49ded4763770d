/**
 * Reads WebSocket frames (RFC 6455 §5) from bytes on their way elsewhere,
 * for a reader that only watches (the agent's inspector shows a
 * WebSocket's messages as they pass). Fragments are joined into messages;
 * control frames (close, ping, pong) are skipped; masked payloads (a
 * client's) are unmasked in the copy.
 *
 * It never holds the bytes back nor changes them, and its memory is
 * bounded whatever the peers send: at most `keep` bytes of each message are
 * copied, the rest only counted, and a frame header (14 bytes at most) is
 * the only other thing held across pieces. Bytes it cannot read (a reserved
 * opcode, a fragment out of place, a length past 2^53) make it stop
 * reading, quietly: the connection is the peers' business, not the
 * watcher's. A message compressed by permessage-deflate (RSV1) is shown as
 * the bytes that passed.
 */

export interface WsMessage {
  text: boolean;
  /** The message's first bytes (at most `keep`), unmasked, in a buffer of their own. */
  data: Uint8Array;
  /** The whole message's length. */
  size: number;
}

const enum Opcode {
  Continuation = 0,
  Text = 1,
  Binary = 2,
  Close = 8,
  Ping = 9,
  Pong = 10,
}

const MAX_HEADER = 14;

export class WebSocketFrameReader {
  private readonly header = new Uint8Array(MAX_HEADER);
  private headerHeld = 0;
  private stopped = false;
  /** Payload bytes of the current frame still to come; -1 while its header is read. */
  private remaining = -1;
  private mask: Uint8Array | undefined;
  /** Payload bytes of the current frame seen so far (the mask's phase). */
  private payloadAt = 0;
  private control = false;
  private fin = false;
  /** The message being read: kept pieces, their bytes, and its length so far. */
  private message: { text: boolean; pieces: Uint8Array[]; kept: number; size: number } | undefined;

  constructor(
    private readonly keep: number,
    private readonly onMessage: (message: WsMessage) => void,
  ) {}

  /** Whether it gave up on these bytes (they are not WebSocket frames it can follow). */
  get gaveUp(): boolean {
    return this.stopped;
  }

  push(bytes: Uint8Array): void {
    let at = 0;
    const n = bytes.byteLength;
    while (at < n && !this.stopped) {
      if (this.remaining < 0) {
        at = this.readHeader(bytes, at);
        continue;
      }
      const take = Math.min(this.remaining, n - at);
      if (!this.control) this.take(bytes, at, take);
      at += take;
      this.remaining -= take;
      this.payloadAt += take;
      if (this.remaining === 0) this.frameDone();
    }
  }

  /** Reads header bytes from `at`; returns where it stopped. */
  private readHeader(bytes: Uint8Array, at: number): number {
    const h = this.header;
    while (at < bytes.byteLength) {
      h[this.headerHeld++] = bytes[at++]!;
      if (this.headerHeld < 2) continue;
      const lengthCode = h[1]! & 0x7f;
      const needed = 2 + (lengthCode === 126 ? 2 : lengthCode === 127 ? 8 : 0) + (h[1]! & 0x80 ? 4 : 0);
      if (this.headerHeld < needed) continue;
      this.startFrame(needed);
      return at;
    }
    return at;
  }

  private startFrame(headerLength: number): void {
    const h = this.header;
    this.headerHeld = 0;
    const opcode = h[0]! & 0x0f;
    this.fin = (h[0]! & 0x80) !== 0;
    let length = h[1]! & 0x7f;
    let at = 2;
    if (length === 126) {
      length = (h[2]! << 8) | h[3]!;
      at = 4;
    } else if (length === 127) {
      const high = ((h[2]! << 24) >>> 0) + (h[3]! << 16) + (h[4]! << 8) + h[5]!;
      if (high >= 0x20_0000) return this.stop(); // past 2^53: no real frame, and no exact number here
      length = high * 2 ** 32 + (((h[6]! << 24) >>> 0) + (h[7]! << 16) + (h[8]! << 8) + h[9]!);
      at = 10;
    }
    this.mask = at < headerLength ? h.slice(at, at + 4) : undefined;
    this.payloadAt = 0;
    this.control = opcode >= Opcode.Close;
    if (this.control) {
      // control frames are whole and small (§5.5); anything else is not a stream to follow
      if (opcode > Opcode.Pong || !this.fin || length > 125) return this.stop();
    } else if (opcode === Opcode.Continuation) {
      if (!this.message) return this.stop();
    } else if (opcode === Opcode.Text || opcode === Opcode.Binary) {
      if (this.message) return this.stop(); // a new message inside a fragmented one
      this.message = { text: opcode === Opcode.Text && (h[0]! & 0x40) === 0, pieces: [], kept: 0, size: 0 };
    } else {
      return this.stop();
    }
    this.remaining = length;
    if (length === 0) this.frameDone();
  }

  /** Counts `n` payload bytes at `at`, copying (unmasked) what fits under `keep`. */
  private take(bytes: Uint8Array, at: number, n: number): void {
    const m = this.message!;
    m.size += n;
    const room = Math.min(this.keep - m.kept, n);
    if (room <= 0) return;
    // a copy of our own, unmasked in place: Buffer's slice() would be a view of the passing bytes
    const copy = new Uint8Array(bytes.subarray(at, at + room));
    const mask = this.mask;
    if (mask) for (let i = 0, phase = this.payloadAt; i < room; i++, phase++) copy[i]! ^= mask[phase & 3]!;
    m.pieces.push(copy);
    m.kept += room;
  }

  private frameDone(): void {
    this.remaining = -1;
    if (this.control || !this.fin) return;
    const m = this.message!;
    this.message = undefined;
    const data = m.pieces.length === 1 ? m.pieces[0]! : concat(m.pieces, m.kept);
    this.onMessage({ text: m.text, data, size: m.size });
  }

  private stop(): void {
    this.stopped = true;
    this.message = undefined;
  }
}

function concat(pieces: Uint8Array[], total: number): Uint8Array {
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}
