/**
 * The buffers muxes write their outgoing frames into, lent for one batch
 * (from its first frame to the send() that copies it out, Mux.flushBatch)
 * and given back after: an idle connection holds none, so ten thousand idle
 * agents on one edge keep no scratch at all, and busy ones share a few.
 * Sizes double from SMALL to the largest message; a lent buffer is always
 * one of them, so a given-back one fits the next batch that asks its size.
 */
import { MAX_MESSAGE } from "./wire.ts";

/** The usual batch (a handshake, small exchanges) fits here. */
const SMALL = 4 * 1024;
/** Free buffers kept for reuse: small ones for many connections' turns at once, larger ones for a few busy connections. */
const KEEP_SMALL = 256;
const KEEP_LARGE = 8;

const small: Uint8Array[] = [];
const large: Uint8Array[] = [];

/** The size a buffer for `needed` bytes is made: SMALL doubled until it fits, at most MAX_MESSAGE (or `needed`, past it). */
function sizeFor(needed: number): number {
  let size = SMALL;
  while (size < needed && size < MAX_MESSAGE) size *= 2;
  return Math.max(Math.min(size, MAX_MESSAGE), needed);
}

/** A buffer of at least `needed` bytes, free or new. */
export function lendScratch(needed: number): Uint8Array {
  if (needed <= SMALL) return small.pop() ?? new Uint8Array(SMALL);
  for (let i = large.length - 1; i >= 0; i--) {
    const buf = large[i]!;
    if (buf.byteLength >= needed) {
      large[i] = large[large.length - 1]!;
      large.pop();
      return buf;
    }
  }
  // allocated fresh: memory an allocator hands out again must be zeroed for a Uint8Array, which makes
  // all of it resident, so it is never bigger than the batches that asked for it
  return new Uint8Array(sizeFor(needed));
}

/** `buf` is free again (its bytes were sent, or copied). */
export function giveBackScratch(buf: Uint8Array): void {
  if (buf.byteLength === SMALL) {
    if (small.length < KEEP_SMALL) small.push(buf);
  } else if (large.length < KEEP_LARGE) large.push(buf);
}
