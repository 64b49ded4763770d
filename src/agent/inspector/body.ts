/**
 * A body as it passes: copies of its first `cap` bytes, and the count of
 * all of them. The bytes the visitor or the service send are never held
 * here beyond the cap, and never waited for.
 *
 * Small pieces are copied into slabs: byte rings the captures share, kept
 * and written again rather than made anew. A piece is a place in a slab (the
 * slab, where, how long: no view object per piece); a slab goes back to be
 * written again once every piece in it has left with its capture (the
 * store's eviction), so a busy tunnel keeps a handful of slabs in use and
 * allocates nothing for its captures' bytes. Reading a body (someone
 * looks) copies it out: nothing read can change when its slab is written
 * again.
 */

const SLAB_BYTES = 256 * 1024;
/** Pieces larger than this get a buffer of their own. */
const SLAB_PIECE_MAX = 16 * 1024;
/** Emptied slabs kept for reuse; more go to the collector. */
const SPARE_SLABS = 4;

class Slab {
  readonly bytes = Buffer.alloc(SLAB_BYTES);
  /** Bytes written from the start. */
  used = 0;
  /** Pieces in it that are still kept. */
  live = 0;
}

let slab = new Slab();
const spare: Slab[] = [];

/** Where a copy is kept: a slab, or a buffer of its own (a large piece). */
export type Place = Slab | Uint8Array;

/** Where the last copy went: its slab (or own buffer) and offset; module state, so a copy makes no object. */
export let placedIn: Place = slab;
export let placedAt = 0;

/** Copies `from` (at most SLAB_PIECE_MAX bytes into a slab) and says where in placedIn/placedAt. */
export function place(from: Uint8Array): void {
  placeRange(from, 0, from.byteLength);
}

/** place() for src[start, end), without a view of it. */
export function placeRange(src: Uint8Array, start: number, end: number): void {
  const n = end - start;
  if (n > SLAB_PIECE_MAX) {
    placedIn = new Uint8Array(src.subarray(start, end)); // a copy (a Buffer's slice() would be a view)
    placedAt = 0;
    return;
  }
  if (slab.used + n > SLAB_BYTES) {
    const full = slab;
    slab = spare.pop() ?? new Slab();
    slab.used = 0;
    if (full.live === 0) keepSpare(full);
  }
  // Buffer's copy of a range takes a read's bytes in without a view, and faster than a typed array's set()
  if (Buffer.isBuffer(src)) src.copy(slab.bytes, slab.used, start, end);
  else slab.bytes.set(start === 0 && end === src.byteLength ? src : src.subarray(start, end), slab.used);
  placedIn = slab;
  placedAt = slab.used;
  slab.used += n;
  slab.live++;
}

/** A piece leaves: its slab is written again once it holds no other. */
export function release(where: Place): void {
  if (!(where instanceof Slab)) return;
  where.live--;
  if (where.live === 0 && where !== slab) keepSpare(where);
}

function keepSpare(s: Slab): void {
  if (spare.length < SPARE_SLABS) spare.push(s);
}

/** The bytes of a piece, as a view (read it before anything is placed or released again). */
function view(where: Slab | Uint8Array, at: number, length: number): Uint8Array {
  const bytes = where instanceof Slab ? where.bytes : where;
  return bytes.subarray(at, at + length);
}

/** The latin1 text of a kept head (its bytes at `where`, blank line included, without it), read before its place is released. */
export function headText(where: Place, at: number, length: number): string {
  const bytes = where instanceof Slab ? where.bytes : Buffer.from(where.buffer, where.byteOffset, where.byteLength);
  return bytes.toString("latin1", at, at + Math.max(0, length - 4));
}

/** Bytes kept in slabs: a piece's place, read when asked and given back when its capture leaves. */
export class KeptBytes {
  /** The first piece (most bodies and every head are one); undefined when nothing is kept. */
  private first: Slab | Uint8Array | undefined;
  private firstAt = 0;
  private firstLength = 0;
  /** Further pieces, flat: where, at, length, where, at, length ... */
  private more: (Slab | Uint8Array | number)[] | undefined;
  /** Bytes kept. */
  captured = 0;

  /** Keeps a copy of `piece`. */
  keep(piece: Uint8Array): void {
    this.keepRange(piece, 0, piece.byteLength);
  }

  /** Keeps a copy of src[start, end). */
  keepRange(src: Uint8Array, start: number, end: number): void {
    placeRange(src, start, end);
    const n = end - start;
    if (this.first === undefined) {
      this.first = placedIn;
      this.firstAt = placedAt;
      this.firstLength = n;
    } else (this.more ??= []).push(placedIn, placedAt, n);
    this.captured += n;
  }

  /** A copy of the kept bytes as one buffer; from then on they are kept in it, out of the slabs. */
  bytes(): Uint8Array {
    if (this.first === undefined) return new Uint8Array(0);
    if (this.more === undefined && !(this.first instanceof Slab)) return this.first.subarray(this.firstAt, this.firstAt + this.firstLength);
    const out = new Uint8Array(this.captured);
    out.set(view(this.first, this.firstAt, this.firstLength));
    let at = this.firstLength;
    const more = this.more ?? [];
    for (let i = 0; i < more.length; i += 3) {
      const piece = view(more[i] as Slab | Uint8Array, more[i + 1] as number, more[i + 2] as number);
      out.set(piece, at);
      at += piece.byteLength;
    }
    this.release();
    this.first = out;
    this.firstAt = 0;
    this.firstLength = out.byteLength;
    this.captured = out.byteLength;
    return out;
  }

  /** Gives the slabs back (the capture left the store): nothing is kept any more. */
  release(): void {
    if (this.first !== undefined) release(this.first);
    const more = this.more;
    if (more) for (let i = 0; i < more.length; i += 3) release(more[i] as Slab | Uint8Array);
    this.first = undefined;
    this.more = undefined;
    this.captured = 0;
  }
}

export class BodyCapture extends KeptBytes {
  /** Bytes that passed, kept or not. */
  size = 0;

  constructor(private readonly cap: number) {
    super();
  }

  /** More bytes passed than were kept. */
  get truncated(): boolean {
    return this.size > this.captured;
  }

  /** Counts `chunk` and keeps a copy of what fits; returns the bytes kept. */
  add(chunk: Uint8Array): number {
    return this.addRange(chunk, 0, chunk.byteLength);
  }

  /** add() for src[start, end), without a view of it. */
  addRange(src: Uint8Array, start: number, end: number): number {
    this.size += end - start;
    const room = this.cap - this.captured;
    if (room <= 0 || end === start) return 0;
    // a copy: the chunk is a view into a buffer the transport may reuse, and holding a view would hold all of it
    const n = Math.min(room, end - start);
    this.keepRange(src, start, start + n);
    return n;
  }
}
