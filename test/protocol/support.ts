/** Small helpers shared by the protocol tests: a seeded PRNG, bounded waits, digests. */

/** mulberry32: a tiny seeded PRNG, so a failing chaotic test can be replayed exactly. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** An integer in [min, max]. */
export const between = (rand: () => number, min: number, max: number) => min + Math.floor(rand() * (max - min + 1));

/** n pseudo-random bytes, the same for the same seed. */
export function randomBytes(seed: number, n: number): Uint8Array {
  const rand = prng(seed);
  const out = new Uint8Array(n);
  const words = new Uint32Array(out.buffer, 0, n >>> 2);
  for (let i = 0; i < words.length; i++) words[i] = (rand() * 4294967296) >>> 0;
  for (let i = words.length * 4; i < n; i++) out[i] = (rand() * 256) | 0;
  return out;
}

/** Splits bytes at random boundaries; `maxPiece` 1 gives single bytes. */
export function chop(bytes: Uint8Array, rand: () => number, maxPiece: number): Uint8Array[] {
  const pieces: Uint8Array[] = [];
  for (let at = 0; at < bytes.byteLength; ) {
    const n = Math.min(between(rand, 1, maxPiece), bytes.byteLength - at);
    pieces.push(bytes.subarray(at, at + n));
    at += n;
  }
  return pieces;
}

export function concat(chunks: readonly Uint8Array[]): Uint8Array {
  const total = chunks.reduce((n, c) => n + c.byteLength, 0);
  const out = new Uint8Array(total);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.byteLength;
  }
  return out;
}

export const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");

/** Rejects with a message naming what was awaited if `promise` takes longer than `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** A promise with its resolver outside, for callbacks that signal an event. */
export function signal<T = void>(): { promise: Promise<T>; resolve(value: T): void; fired(): boolean } {
  let resolve!: (value: T) => void;
  let done = false;
  const promise = new Promise<T>((r) => (resolve = r));
  return {
    promise,
    resolve(value: T) {
      done = true;
      resolve(value);
    },
    fired: () => done,
  };
}

const decoder = new TextDecoder();
export const text = (bytes: Uint8Array) => decoder.decode(bytes);
export const bytes = (s: string) => new TextEncoder().encode(s);
