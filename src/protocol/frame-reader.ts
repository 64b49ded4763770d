/**
 * Cuts a byte stream (a raw TCP or TLS connection) back into frames, for
 * the mux: runs of whole frames for Mux.receive(), which expects what a
 * WebSocket message holds, and the pieces of a DATA frame that reads cut,
 * for Mux.receiveFrame().
 *
 * Whole frames inside one read are passed on as a view of that read, with no
 * copy. A DATA frame cut by reads is passed on piece by piece as its bytes
 * come, each piece a view of its read (a DATA frame of its own; the FIN, if
 * the frame carries one, goes with the last piece): the bytes of a bulk
 * transfer are never gathered here, whatever the frame and read sizes. Any
 * other frame split across reads (OPEN, REPLY... at most MAX_PAYLOAD) is
 * copied into a buffer of exactly its size. A header is checked as soon as
 * it is whole: a length past MAX_PAYLOAD is refused from the header alone,
 * so a hostile peer can make the reader hold at most one largest frame.
 */
import { checkHeader, ProtocolError, readU32At, type Frame } from "./frames.ts";
import { FLAG_FIN, FrameType, HEADER_LENGTH, MAX_PAYLOAD } from "./wire.ts";

export class FrameReader {
  /** A header cut by reads, being completed. */
  private header = new Uint8Array(HEADER_LENGTH);
  private headerFilled = 0;
  /** A frame other than DATA cut by reads, being gathered (its header included). */
  private frame?: Uint8Array;
  private frameFilled = 0;
  /** A DATA frame cut by reads, being passed on: its stream, the payload bytes still to come, its FIN. */
  private dataStream = 0;
  private dataLeft = 0;
  private dataFin = false;
  /** Why the reader refused: it refuses every later read too. */
  private refusal?: string;

  /**
   * `deliver`: runs of whole frames. `deliverPiece`: a piece of a DATA frame
   * cut by reads; without it, such frames are gathered whole and delivered
   * with the rest.
   */
  constructor(
    private readonly deliver: (frames: Uint8Array) => void,
    private readonly deliverPiece?: (piece: Frame) => void,
  ) {}

  /** Bytes held while waiting for the rest of a frame (a DATA frame's bytes are passed on, not held). */
  get buffered(): number {
    return this.frame ? this.frameFilled : this.headerFilled;
  }

  /** Feeds one read. Throws ProtocolError on a header no peer may send, and on every read after that. */
  push(chunk: Uint8Array): void {
    if (this.refusal !== undefined) throw new ProtocolError(this.refusal);
    try {
      this.read(chunk);
    } catch (err) {
      if (err instanceof ProtocolError) this.refusal = err.message;
      throw err;
    }
  }

  private read(chunk: Uint8Array): void {
    let at = this.completePartial(chunk);
    const start = at;
    const end = chunk.byteLength;
    while (end - at >= HEADER_LENGTH) {
      const size = HEADER_LENGTH + payloadLength(chunk, at);
      if (end - at < size) break;
      at += size;
    }
    if (at > start) this.deliver(chunk.subarray(start, at));
    if (at < end) this.keep(chunk, at);
  }

  /** Uses the start of `chunk` to finish a frame begun in earlier reads; returns how much it took. */
  private completePartial(chunk: Uint8Array): number {
    let at = 0;
    if (this.headerFilled > 0 && !this.frame && this.dataLeft === 0) {
      const n = Math.min(HEADER_LENGTH - this.headerFilled, chunk.byteLength);
      this.header.set(chunk.subarray(0, n), this.headerFilled);
      this.headerFilled += n;
      at = n;
      if (this.headerFilled < HEADER_LENGTH) return at;
      this.startFrame(this.header, 0);
      this.headerFilled = 0;
    }
    if (this.dataLeft > 0) return at + this.passData(chunk, at);
    if (!this.frame) return at;
    const n = Math.min(this.frame.byteLength - this.frameFilled, chunk.byteLength - at);
    this.frame.set(chunk.subarray(at, at + n), this.frameFilled);
    this.frameFilled += n;
    at += n;
    if (this.frameFilled === this.frame.byteLength) {
      const whole = this.frame;
      this.frame = undefined;
      this.frameFilled = 0;
      this.deliver(whole);
    }
    return at;
  }

  /** What is left of a read after its whole frames: the start of the next frame. */
  private keep(chunk: Uint8Array, at: number): void {
    const rest = chunk.byteLength - at;
    if (rest < HEADER_LENGTH) {
      this.header.set(chunk.subarray(at), 0);
      this.headerFilled = rest;
      return;
    }
    this.startFrame(chunk, at);
    const from = at + HEADER_LENGTH;
    if (this.dataLeft > 0) this.passData(chunk, from);
    else {
      this.frame!.set(chunk.subarray(from), HEADER_LENGTH);
      this.frameFilled += chunk.byteLength - from;
    }
  }

  /**
   * A frame cut by reads begins with the whole header at `at`: a DATA frame
   * is passed on as it comes (an empty one at once), any other gathered into
   * a buffer of its size.
   */
  private startFrame(bytes: Uint8Array, at: number): void {
    const isData = this.deliverPiece !== undefined && (bytes[at]! & ~FLAG_FIN) === FrameType.DATA;
    if (!isData) {
      const frame = new Uint8Array(HEADER_LENGTH + payloadLength(bytes, at));
      frame.set(bytes.subarray(at, at + HEADER_LENGTH), 0);
      this.frame = frame;
      this.frameFilled = HEADER_LENGTH;
      return;
    }
    const length = checkHeader(bytes, at);
    this.dataStream = readU32At(bytes, at + 1);
    this.dataFin = (bytes[at]! & FLAG_FIN) !== 0;
    this.dataLeft = length;
    if (length === 0) this.deliverPiece!({ type: FrameType.DATA, stream: this.dataStream, payload: bytes.subarray(0, 0), fin: this.dataFin });
  }

  /** Passes on the bytes of the DATA frame in passing that `chunk` holds from `at`; returns how many. */
  private passData(chunk: Uint8Array, at: number): number {
    const n = Math.min(this.dataLeft, chunk.byteLength - at);
    if (n === 0) return 0;
    this.dataLeft -= n;
    const fin = this.dataLeft === 0 && this.dataFin;
    this.deliverPiece!({ type: FrameType.DATA, stream: this.dataStream, payload: chunk.subarray(at, at + n), fin });
    return n;
  }
}

function payloadLength(m: Uint8Array, at: number): number {
  const length = readU32At(m, at + 5);
  if (length > MAX_PAYLOAD) throw new ProtocolError(`frame payload of ${length} bytes exceeds ${MAX_PAYLOAD}`);
  return length;
}
