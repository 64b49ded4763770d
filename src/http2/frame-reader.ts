/**
 * Reads HTTP/2 frames (RFC 9113 §4.1) out of a byte stream as reads cut it.
 *
 * A frame's header is checked as soon as it is whole: a length past this
 * side's SETTINGS_MAX_FRAME_SIZE is a FRAME_SIZE_ERROR before a byte of
 * its payload is kept, so a peer can make the reader hold at most one
 * largest frame. Whole frames inside one read are passed on as views of
 * that read, with no copy; a frame other than DATA cut by reads is gathered
 * into a buffer of its size. DATA is passed on as it comes, in pieces
 * (each a view of its read), its padding left out: a bulk upload is never
 * gathered here, whatever the frame and read sizes.
 */
import { ConnectionError, ErrorCode, Flag, FRAME_HEADER_LENGTH, FrameType } from "./wire.ts";

/** Who takes the frames: the connection. Views passed are valid during the call only. */
export interface FrameSink {
  /** A whole frame other than DATA. */
  frame(type: number, flags: number, stream: number, payload: Uint8Array): void;
  /** A DATA frame begins; `length` is its whole payload (padding included), which flow control counts. */
  dataStart(stream: number, flags: number, length: number): void;
  /** Bytes of the DATA frame's content as they come (never empty). */
  dataPiece(bytes: Uint8Array): void;
  /** The DATA frame's last byte has come. */
  dataEnd(): void;
}

export class FrameReader {
  /** A header cut by reads, being completed. */
  private readonly header = new Uint8Array(FRAME_HEADER_LENGTH);
  private headerFilled = 0;
  /** A frame other than DATA cut by reads, being gathered: its payload and what it is. */
  private gathering: Uint8Array | undefined;
  private gathered = 0;
  private gatherType = 0;
  private gatherFlags = 0;
  private gatherStream = 0;
  /** A DATA frame in passing: its pad length is still to come; content and padding bytes still to come. */
  private inData = false;
  private padLengthDue = false;
  private dataPayloadLeft = 0;
  private contentLeft = 0;
  private padLeft = 0;

  constructor(
    private readonly sink: FrameSink,
    /** The largest payload this side takes: its SETTINGS_MAX_FRAME_SIZE. */
    private readonly maxFrameSize: number,
  ) {}

  /** Bytes held while waiting for the rest of a frame (DATA is passed on, not held). */
  get buffered(): number {
    return this.gathering ? this.gathered : this.headerFilled;
  }

  /** Feeds one read. Throws a ConnectionError (from here or from the sink); the reader is then done with. */
  push(chunk: Uint8Array): void {
    const end = chunk.byteLength;
    let at = 0;
    while (at < end) {
      if (this.inData) {
        at = this.passData(chunk, at);
        continue;
      }
      if (this.gathering) {
        at = this.gather(chunk, at);
        continue;
      }
      if (this.headerFilled > 0 || end - at < FRAME_HEADER_LENGTH) {
        const n = Math.min(FRAME_HEADER_LENGTH - this.headerFilled, end - at);
        this.header.set(chunk.subarray(at, at + n), this.headerFilled);
        this.headerFilled += n;
        at += n;
        if (this.headerFilled < FRAME_HEADER_LENGTH) return;
        this.headerFilled = 0;
        at = this.begin(this.header, 0, chunk, at);
      } else {
        at = this.begin(chunk, at, chunk, at + FRAME_HEADER_LENGTH);
      }
    }
  }

  /** A header is whole at `h[hAt]`; its payload starts at `chunk[at]`. Returns where reading goes on. */
  private begin(h: Uint8Array, hAt: number, chunk: Uint8Array, at: number): number {
    const length = (h[hAt]! << 16) | (h[hAt + 1]! << 8) | h[hAt + 2]!;
    const type = h[hAt + 3]!;
    const flags = h[hAt + 4]!;
    const stream = ((h[hAt + 5]! & 0x7f) << 24) | (h[hAt + 6]! << 16) | (h[hAt + 7]! << 8) | h[hAt + 8]!;
    if (length > this.maxFrameSize) {
      throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, `a frame of ${length} bytes, past the ${this.maxFrameSize} allowed`);
    }
    if (type === FrameType.DATA) {
      const padded = (flags & Flag.PADDED) !== 0;
      if (padded && length === 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a padded DATA frame without its pad length");
      this.sink.dataStart(stream, flags, length);
      this.inData = true;
      this.padLengthDue = padded;
      this.dataPayloadLeft = length;
      this.contentLeft = padded ? 0 : length;
      this.padLeft = 0;
      return this.passData(chunk, at);
    }
    if (chunk.byteLength - at >= length) {
      this.sink.frame(type, flags, stream, chunk.subarray(at, at + length));
      return at + length;
    }
    this.gathering = new Uint8Array(length);
    this.gathered = 0;
    this.gatherType = type;
    this.gatherFlags = flags;
    this.gatherStream = stream;
    return this.gather(chunk, at);
  }

  private gather(chunk: Uint8Array, at: number): number {
    const frame = this.gathering!;
    const n = Math.min(frame.byteLength - this.gathered, chunk.byteLength - at);
    frame.set(chunk.subarray(at, at + n), this.gathered);
    this.gathered += n;
    if (this.gathered < frame.byteLength) return at + n;
    this.gathering = undefined;
    this.sink.frame(this.gatherType, this.gatherFlags, this.gatherStream, frame);
    return at + n;
  }

  /** Passes on what `chunk` holds of the DATA frame in passing, from `at`; returns where it ends. */
  private passData(chunk: Uint8Array, at: number): number {
    const end = chunk.byteLength;
    if (this.padLengthDue) {
      if (at === end) return at;
      this.padLengthDue = false;
      this.padLeft = chunk[at++]!;
      this.dataPayloadLeft--;
      // the padding must leave room for itself within the payload (RFC 9113 §6.1)
      if (this.padLeft > this.dataPayloadLeft) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "DATA padding longer than its frame");
      this.contentLeft = this.dataPayloadLeft - this.padLeft;
    }
    if (this.contentLeft > 0 && at < end) {
      const n = Math.min(this.contentLeft, end - at);
      this.contentLeft -= n;
      this.dataPayloadLeft -= n;
      this.sink.dataPiece(chunk.subarray(at, at + n));
      at += n;
    }
    if (this.contentLeft === 0 && this.padLeft > 0) {
      const n = Math.min(this.padLeft, end - at);
      this.padLeft -= n;
      this.dataPayloadLeft -= n;
      at += n;
    }
    if (this.dataPayloadLeft === 0 && !this.padLengthDue) {
      this.inData = false;
      this.sink.dataEnd();
    }
    return at;
  }
}
