/**
 * Gathers one message head (a request's or a response's) from bytes as they
 * arrive, up to the blank line that ends it. A head that comes in one piece
 * is read where it lies; one that comes in pieces is held, at most `max`
 * bytes, in a buffer that grows by doubling (a head trickling in byte by
 * byte costs linear time, not quadratic).
 *
 * Lines end in CRLF. A bare LF where a head could end (LF LF, or CRLF LF) is
 * refused at once rather than waited on: a sender that ends lines with LF
 * alone would otherwise hang until the size cap or a timeout, and a reader
 * that took LF for CRLF where another did not is how requests are smuggled.
 */

const HEAD_END = Buffer.from("\r\n\r\n");
const BARE_LF_END = Buffer.from("\n\n");

export type HeadRead =
  /**
   * The head's text (latin1, without the blank line) and where in the input
   * the bytes after it start: one object per reader, filled anew by each
   * read (take what you need from it before the next).
   */
  | { text: string; next: number; raw?: Uint8Array }
  /** Not yet complete: everything from `at` was taken and is held. */
  | "incomplete"
  /** Longer than allowed, or lines that end in LF alone. */
  | "too-large"
  | "bare-lf";

export class HeadReader {
  /** Bytes of a head that came in pieces; undefined while none is pending. */
  private partial: Uint8Array | undefined;
  private partialLength = 0;

  private readonly found: { text: string; next: number; raw: Uint8Array | undefined } = { text: "", next: 0, raw: undefined };

  constructor(private readonly max: number) {}

  private give(text: string, next: number, raw: Uint8Array | undefined): HeadRead {
    const found = this.found;
    found.text = text;
    found.next = next;
    found.raw = raw;
    return found;
  }

  /** Bytes held of a head not yet complete. */
  get pending(): number {
    return this.partialLength;
  }

  /**
   * Reads a head from `bytes` at `at`. With `keepRaw`, a head that came in
   * pieces also comes back as its bytes (`raw`, the blank line included), for
   * a caller that passes heads on as they arrived. With `decode` false the
   * head is not made a string at all (`text` is empty) and always comes
   * back as its bytes, for a caller that reads them (response-head-bytes.ts,
   * request-head-bytes.ts): those bytes are not searched for a bare LF, so
   * the caller reads them with a parser that refuses any LF not after a CR,
   * or asks hasBareLf() before it reads them any other way. With `inPlace`
   * too, a head that lies whole in `bytes` comes back without `raw`: it is
   * `bytes` from `at` to `next` (no view is made of it); one that came in
   * pieces comes back as `raw` all the same.
   */
  read(bytes: Uint8Array, at: number, keepRaw = false, decode = true, inPlace = false): HeadRead {
    const view = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (this.partial === undefined) {
      const end = view.indexOf(HEAD_END, at);
      if (end >= 0 && end + 4 - at <= this.max) {
        // a head that is the whole read, the usual request, is that read itself; `inPlace`: the caller reads it in `bytes`, from `at` to `next`
        if (!decode) return this.give("", end + 4, inPlace ? undefined : at === 0 && end + 4 === view.byteLength ? view : view.subarray(at, end + 4));
        if (bareLf(view, at, end)) return "bare-lf";
        return this.give(view.toString("latin1", at, end), end + 4, undefined);
      }
      if (end < 0 && bareLf(view, at, view.byteLength)) return "bare-lf";
      if (view.byteLength - at >= this.max) return "too-large";
      this.append(view.subarray(at));
      return "incomplete";
    }
    const searchFrom = Math.max(0, this.partialLength - 3);
    const take = Math.min(this.max - this.partialLength, view.byteLength - at);
    this.append(view.subarray(at, at + take));
    const buffered = Buffer.from(this.partial.buffer, 0, this.partialLength);
    const end = buffered.indexOf(HEAD_END, searchFrom);
    if (end < 0) {
      if (bareLf(buffered, Math.max(0, searchFrom - 1), buffered.byteLength)) return "bare-lf";
      return take < view.byteLength - at || this.partialLength >= this.max ? "too-large" : "incomplete";
    }
    if (decode && bareLf(buffered, 0, end)) return "bare-lf";
    const text = decode ? buffered.toString("latin1", 0, end) : "";
    // the bytes after the head in this piece: those taken into the buffer beyond the end mark go back
    const next = at + take - (this.partialLength - (end + 4));
    const raw = keepRaw || !decode ? buffered.slice(0, end + 4) : undefined;
    this.reset();
    return this.give(text, next, raw);
  }

  /** Forgets a pending head. */
  reset(): void {
    this.partial = undefined;
    this.partialLength = 0;
  }

  private append(piece: Uint8Array): void {
    const needed = this.partialLength + piece.byteLength;
    if (!this.partial || this.partial.byteLength < needed) {
      const grown = new Uint8Array(Math.min(this.max, Math.max(needed, (this.partial?.byteLength ?? 512) * 2)));
      if (this.partial) grown.set(this.partial.subarray(0, this.partialLength));
      this.partial = grown;
    }
    this.partial.set(piece, this.partialLength);
    this.partialLength = needed;
  }
}

/** Whether a head read as bytes (its blank line included: HeadReader.read with `decode` false) has a line that ends in LF alone where it could end. */
export function hasBareLf(raw: Uint8Array): boolean {
  const view = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return bareLf(view, 0, view.byteLength - 4);
}

/** The text of a head read as bytes, without its blank line. */
export function headTextOf(raw: Uint8Array): string {
  const view = Buffer.isBuffer(raw) ? raw : Buffer.from(raw.buffer, raw.byteOffset, raw.byteLength);
  return view.toString("latin1", 0, view.byteLength - 4);
}

/**
 * Whether `view[from, to)` holds a place where a head would end on a bare
 * LF: LF LF, or CRLF LF, which holds LF LF too (one search, not two).
 */
function bareLf(view: Buffer, from: number, to: number): boolean {
  return view.subarray(from, to).indexOf(BARE_LF_END) >= 0; // never searched into a body that follows
}
