/**
 * The counts behind the rate-limit action, behind an interface so that the
 * nodes of a cluster can later share them through the database; this one
 * keeps them in the process. A bucket is a sliding window approximated by
 * two fixed ones (the count of the window before, weighted by how much of
 * it still overlaps, plus the count of this one), as Cloudflare and nginx
 * count: a constant size per bucket, and a burst at a window's edge cannot
 * pass twice the capacity. A request is counted when it is judged, before
 * anything that waits; a refused request is not counted, so a client that
 * keeps knocking is let in again at the rate, not locked out for good.
 */

export interface RateLimitVerdict {
  limited: boolean;
  /** When a limited request may try again, in ms from now (0 when not limited). */
  retryAfterMs: number;
  /** Requests left in the window after this one. */
  remaining: number;
}

export interface RateLimitStore {
  /** Counts one request in `bucket` (if it is let through) and says whether it was over `capacity` per `windowMs`. */
  hit(bucket: string, capacity: number, windowMs: number, now: number): RateLimitVerdict | Promise<RateLimitVerdict>;
}

interface Bucket {
  /** Start of the current fixed window (a multiple of windowMs). */
  start: number;
  current: number;
  previous: number;
}

/** Buckets a process keeps before the least recently used is forgotten. */
export const DEFAULT_MAX_BUCKETS = 100_000;

export class MemoryRateLimitStore implements RateLimitStore {
  private readonly buckets = new Map<string, Bucket>();
  /** The bucket used last: last in the map's order already (one visitor's requests in a row move nothing). */
  private lastKey: string | undefined;

  constructor(private readonly maxBuckets = DEFAULT_MAX_BUCKETS) {}

  get size(): number {
    return this.buckets.size;
  }

  hit(key: string, capacity: number, windowMs: number, now: number): RateLimitVerdict {
    const start = Math.floor(now / windowMs) * windowMs;
    const found = this.buckets.get(key);
    let b = found;
    const last = key === this.lastKey;
    if (b && !last) this.buckets.delete(key); // re-inserted below: the map's order is the use order
    if (!b) b = { start, current: 0, previous: 0 };
    else if (b.start !== start) {
      b = { start, previous: b.start === start - windowMs ? b.current : 0, current: 0 };
    }
    const elapsed = now - start;
    const weight = 1 - elapsed / windowMs;
    const estimate = b.previous * weight + b.current;
    // the same visitor's bucket, unchanged and last in the map's order already: nothing to put back
    if (last && b === found) return this.counted(b, capacity, windowMs, elapsed, estimate);
    this.buckets.set(key, b);
    this.lastKey = key;
    if (this.buckets.size > this.maxBuckets) {
      const oldest = this.buckets.keys().next().value!;
      this.buckets.delete(oldest);
      if (oldest === key) this.lastKey = undefined;
    }
    return this.counted(b, capacity, windowMs, elapsed, estimate);
  }

  private counted(b: Bucket, capacity: number, windowMs: number, elapsed: number, estimate: number): RateLimitVerdict {
    if (estimate + 1 > capacity) return { limited: true, retryAfterMs: retryAfter(b, capacity, windowMs, elapsed), remaining: 0 };
    b.current++;
    return { limited: false, retryAfterMs: 0, remaining: Math.max(0, Math.floor(capacity - (estimate + 1))) };
  }
}

/** How long until one more request fits: the previous window's share has to shrink, or this window has to pass. */
export function retryAfter(b: { current: number; previous: number }, capacity: number, windowMs: number, elapsed: number): number {
  if (b.current + 1 <= capacity && b.previous > 0) {
    // previous * (1 - (elapsed + t) / window) + current + 1 <= capacity
    const t = windowMs * (1 - (capacity - 1 - b.current) / b.previous) - elapsed;
    return Math.max(1, Math.ceil(t));
  }
  // the next window, where this one's count is the previous: current * (1 - e / window) + 1 <= capacity
  const e = b.current > 0 ? windowMs * Math.max(0, 1 - (capacity - 1) / b.current) : 0;
  return Math.max(1, Math.ceil(windowMs - elapsed + e));
}
