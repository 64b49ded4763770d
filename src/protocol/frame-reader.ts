/**
 * Cuts a byte stream (a raw TCP or TLS connection) back into runs of whole
 * frames, for Mux.receive(), which expects what a WebSocket message holds.
 *
 * Whole frames inside one read are passed on as a view of that read, with no
 * copy; only a frame split across reads is copied, into a buffer of exactly
 * its size. A length past MAX_PAYLOAD is refused from the header alone, so a
 * hostile peer can make the reader hold at most one largest frame.
 */
import { ProtocolError } from "./frames.ts";
import { HEADER_LENGTH, MAX_PAYLOAD } from "./wire.ts";

export class FrameReader {
  /** The frame being completed across reads: its header first, then the whole frame. */
  private header = new Uint8Array(HEADER_LENGTH);
  private headerFilled = 0;
  private frame?: Uint8Array;
  private frameFilled = 0;

  constructor(private readonly deliver: (frames: Uint8Array) => void) {}

  /** Bytes held while waiting for the rest of a frame. */
  get buffered(): number {
    return this.frame ? this.frameFilled : this.headerFilled;
  }

  /** Feeds one read. Throws ProtocolError on a frame length no peer may send. */
  push(chunk: Uint8Array): void {
    let at = this.completePartial(chunk);
    const start = at;
    const end = chunk.byteLength;
    while (end - at >= HEADER_LENGTH) {
      const size = HEADER_LENGTH + payloadLength(chunk, at);
      if (end - at < size) break;
      at += size;
    }
    if (at > start) this.deliver(chunk.subarray(start, at));
    if (at < end) this.keep(chunk.subarray(at));
  }

  /** Uses the start of `chunk` to finish a frame begun in earlier reads; returns how much it took. */
  private completePartial(chunk: Uint8Array): number {
    let at = 0;
    if (this.headerFilled > 0 && !this.frame) {
      const n = Math.min(HEADER_LENGTH - this.headerFilled, chunk.byteLength);
      this.header.set(chunk.subarray(0, n), this.headerFilled);
      this.headerFilled += n;
      at = n;
      if (this.headerFilled < HEADER_LENGTH) return at;
      this.startFrame(this.header);
    }
    if (!this.frame) return at;
    const n = Math.min(this.frame.byteLength - this.frameFilled, chunk.byteLength - at);
    this.frame.set(chunk.subarray(at, at + n), this.frameFilled);
    this.frameFilled += n;
    at += n;
    if (this.frameFilled === this.frame.byteLength) {
      const whole = this.frame;
      this.frame = undefined;
      this.frameFilled = 0;
      this.headerFilled = 0;
      this.deliver(whole);
    }
    return at;
  }

  private keep(rest: Uint8Array): void {
    if (rest.byteLength < HEADER_LENGTH) {
      this.header.set(rest, 0);
      this.headerFilled = rest.byteLength;
      return;
    }
    this.startFrame(rest);
    this.frame!.set(rest, 0);
    this.frameFilled = rest.byteLength;
  }

  /** Allocates the buffer for the frame whose header starts `bytes`. */
  private startFrame(bytes: Uint8Array): void {
    const frame = new Uint8Array(HEADER_LENGTH + payloadLength(bytes, 0));
    frame.set(bytes.subarray(0, HEADER_LENGTH), 0);
    this.frame = frame;
    this.frameFilled = HEADER_LENGTH;
    this.headerFilled = HEADER_LENGTH;
  }
}

function payloadLength(m: Uint8Array, at: number): number {
  const length = ((m[at + 5]! << 24) | (m[at + 6]! << 16) | (m[at + 7]! << 8) | m[at + 8]!) >>> 0;
  if (length > MAX_PAYLOAD) throw new ProtocolError(`frame payload of ${length} bytes exceeds ${MAX_PAYLOAD}`);
  return length;
}
