/**
 * A header block's frames: HEADERS (its padding and priority taken off,
 * RFC 9113 §6.2) and the CONTINUATION frames that follow it until one ends
 * the block (§6.10), gathered into one block for HPACK.
 *
 * Bounded both ways, against the CONTINUATION flood (endless blocks, or
 * blocks of endless empty frames): a block may hold at most the header
 * list's bound in bytes (a block never decodes to less than its size) and
 * at most H2_MAX_CONTINUATION_FRAMES frames. Past either the connection
 * ends (ENHANCE_YOUR_CALM): the block cannot be decoded without gathering
 * it, and without decoding it the HPACK tables are out of step. A block
 * ended by its HEADERS (nearly every one) is never copied.
 */
import { H2_MAX_CONTINUATION_FRAMES } from "./limits.ts";
import { ConnectionError, ErrorCode, Flag } from "./wire.ts";

export class HeaderBlocks {
  /** The stream whose block is being gathered (0: none). */
  stream = 0;
  /** Its HEADERS carried END_STREAM. */
  endStream = false;
  /** Its HEADERS named the stream itself as its dependency (a stream error once the block is read). */
  selfDependent = false;
  /** When its HEADERS came (performance.now()): the block must be whole within the idle timeout. */
  since = 0;
  /** The fragment of the HEADERS frame read last (headers()), a view of its payload. */
  fragment: Uint8Array = new Uint8Array(0);
  private buf: Uint8Array | undefined;
  private size = 0;
  private frames = 0;

  constructor(private readonly maxBytes: number) {}

  /**
   * Reads a HEADERS frame into `fragment`, `endStream`, `selfDependent`;
   * true when it ends its block (the fragment is the whole block), false
   * when CONTINUATION frames follow (it is gathered).
   */
  headers(flags: number, stream: number, payload: Uint8Array): boolean {
    let start = 0;
    let end = payload.byteLength;
    if (flags & Flag.PADDED) {
      if (end < 1) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a padded HEADERS frame without its pad length");
      end -= payload[0]!;
      start = 1;
    }
    this.selfDependent = false;
    if (flags & Flag.PRIORITY) {
      if (start + 5 > payload.byteLength) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "a HEADERS frame too short for its priority");
      const dependency = ((payload[start]! & 0x7f) << 24) | (payload[start + 1]! << 16) | (payload[start + 2]! << 8) | payload[start + 3]!;
      this.selfDependent = dependency === stream;
      start += 5;
    }
    // padding longer than what is left for the block (RFC 9113 §6.2)
    if (end < start) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "HEADERS padding longer than its frame");
    this.fragment = payload.subarray(start, end);
    this.endStream = (flags & Flag.END_STREAM) !== 0;
    if (flags & Flag.END_HEADERS) return true;
    this.stream = stream;
    this.since = performance.now();
    this.frames = 0;
    this.size = 0;
    this.append(this.fragment);
    return false;
  }

  /** Adds a CONTINUATION frame's payload; true when it ends the block (then take() it). */
  continuation(flags: number, stream: number, payload: Uint8Array): boolean {
    if (this.stream === 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "CONTINUATION without HEADERS before it");
    if (stream !== this.stream) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "CONTINUATION on another stream than its HEADERS");
    if (++this.frames > H2_MAX_CONTINUATION_FRAMES) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `a header block in more than ${H2_MAX_CONTINUATION_FRAMES} CONTINUATION frames`);
    this.append(payload);
    return (flags & Flag.END_HEADERS) !== 0;
  }

  /** The gathered block; the gathering ends (its bytes are the caller's until the next block). */
  take(): Uint8Array {
    const block = this.buf!.subarray(0, this.size);
    this.stream = 0;
    // a buffer grown for a large block is not kept past it
    if (this.buf!.byteLength > 16 * 1024) this.buf = undefined;
    return block;
  }

  private append(bytes: Uint8Array): void {
    const size = this.size + bytes.byteLength;
    if (size > this.maxBytes) throw new ConnectionError(ErrorCode.ENHANCE_YOUR_CALM, `a header block past ${this.maxBytes} bytes`);
    if (!this.buf || size > this.buf.byteLength) {
      const grown = new Uint8Array(Math.min(this.maxBytes, Math.max(size, (this.buf?.byteLength ?? 2048) * 2)));
      if (this.buf) grown.set(this.buf.subarray(0, this.size));
      this.buf = grown;
    }
    this.buf.set(bytes, this.size);
    this.size = size;
  }
}
