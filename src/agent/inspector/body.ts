/**
 * A body as it passes: copies of its first `cap` bytes, and the count of
 * all of them. The bytes the visitor or the service send are never held
 * here beyond the cap, and never waited for.
 */

/**
 * Small pieces are copied into shared slabs rather than a buffer each: a
 * thousand kept 1 KiB bodies are then a handful of buffers for the garbage
 * collector, not a thousand (each with its own backing store to free). A
 * slab lives while any piece in it is kept; captures leave oldest first, so
 * the slabs go in the order they were filled.
 */
const SLAB_BYTES = 256 * 1024;
const SLAB_PIECE_MAX = 16 * 1024;
let slab = new Uint8Array(SLAB_BYTES);
let slabUsed = 0;

/** A copy of the first `n` bytes of `chunk`, detached from the transport's buffer. */
function copyOf(chunk: Uint8Array, n: number): Uint8Array {
  const from = n === chunk.byteLength ? chunk : chunk.subarray(0, n);
  if (n > SLAB_PIECE_MAX) return new Uint8Array(from); // a copy (Buffer's slice() would be a view)
  if (slabUsed + n > SLAB_BYTES) {
    slab = new Uint8Array(SLAB_BYTES);
    slabUsed = 0;
  }
  const piece = slab.subarray(slabUsed, slabUsed + n);
  piece.set(from);
  slabUsed += n;
  return piece;
}

export class BodyCapture {
  /** The kept pieces; most bodies are one. */
  private first: Uint8Array | undefined;
  private more: Uint8Array[] | undefined;
  /** Bytes kept. */
  captured = 0;
  /** Bytes that passed, kept or not. */
  size = 0;

  constructor(private readonly cap: number) {}

  /** More bytes passed than were kept. */
  get truncated(): boolean {
    return this.size > this.captured;
  }

  /** Counts `chunk` and keeps a copy of what fits; returns the bytes kept. */
  add(chunk: Uint8Array): number {
    this.size += chunk.byteLength;
    const room = this.cap - this.captured;
    if (room <= 0 || chunk.byteLength === 0) return 0;
    // a copy: the chunk is a view into a buffer the transport may reuse, and holding a view would hold all of it
    const piece = copyOf(chunk, Math.min(room, chunk.byteLength));
    if (this.first === undefined) this.first = piece;
    else (this.more ??= []).push(piece);
    this.captured += piece.byteLength;
    return piece.byteLength;
  }

  /** The kept bytes as one buffer (joined once, on first ask). */
  bytes(): Uint8Array {
    if (this.first === undefined) return new Uint8Array(0);
    if (this.more) {
      this.first = Buffer.concat([this.first, ...this.more]);
      this.more = undefined;
    }
    return this.first;
  }
}
