/**
 * A body as it passes: copies of its first `cap` bytes, and the count of
 * all of them. The bytes the visitor or the service send are never held
 * here beyond the cap, and never waited for.
 */
export class BodyCapture {
  private pieces: Uint8Array[] = [];
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
    const piece = chunk.byteLength <= room ? chunk.slice() : chunk.slice(0, room);
    this.pieces.push(piece);
    this.captured += piece.byteLength;
    return piece.byteLength;
  }

  /** The kept bytes as one buffer (joined once, on first ask). */
  bytes(): Uint8Array {
    if (this.pieces.length === 0) return new Uint8Array(0);
    if (this.pieces.length > 1) this.pieces = [Buffer.concat(this.pieces)];
    return this.pieces[0]!;
  }
}
