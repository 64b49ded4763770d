/**
 * The rate-limit counts of a cluster's nodes, shared: each node counts in
 * memory as MemoryRateLimitStore does (the same sliding window of two
 * fixed ones, the same answer at once, nothing awaited per request), and
 * besides keeps what it counted since it last told the others. Every sync
 * (cluster/rate-limit-sync.ts) it hands those deltas over and adds the
 * others' to its own buckets, so each node's count of a bucket is every
 * node's requests but those of the last sync or so: the limit holds over
 * the cluster within what the other nodes let through in one sync interval.
 *
 * Buckets are kept by a digest of their key (the same on every node), the
 * form they travel in: an action's key may be long.
 */
import { createHash } from "node:crypto";
import { DEFAULT_MAX_BUCKETS, retryAfter, type RateLimitStore, type RateLimitVerdict } from "./rate-limit-store.ts";

/** One bucket's requests counted on one node in one fixed window: [digest, window start (ms), window length (ms), count]. */
export type RateLimitDelta = [string, number, number, number];

interface Bucket {
  windowMs: number;
  /** Start of the current fixed window (a multiple of windowMs). */
  start: number;
  /** This window's count: this node's and what the others said. */
  current: number;
  previous: number;
  /** This node's count in this window not told yet. */
  unsent: number;
}

/** The digest a bucket travels by: 128 bits of SHA-256 (no key can be chosen to land in another's bucket). */
export function bucketDigest(key: string): string {
  return createHash("sha256").update(key).digest("base64url").slice(0, 22);
}

export class SyncedRateLimitStore implements RateLimitStore {
  private readonly buckets = new Map<string, Bucket>();
  /** Deltas of windows that ended before they were told. */
  private outbox: RateLimitDelta[] = [];

  constructor(private readonly maxBuckets = DEFAULT_MAX_BUCKETS) {}

  get size(): number {
    return this.buckets.size;
  }

  hit(key: string, capacity: number, windowMs: number, now: number): RateLimitVerdict {
    const digest = bucketDigest(key);
    const start = Math.floor(now / windowMs) * windowMs;
    let b = this.buckets.get(digest);
    if (b) this.buckets.delete(digest); // re-inserted below: the map's order is the use order
    if (!b || b.windowMs !== windowMs) b = { windowMs, start, current: 0, previous: 0, unsent: 0 };
    else if (b.start !== start) this.roll(digest, b, start);
    this.keep(digest, b);
    const elapsed = now - start;
    const estimate = b.previous * (1 - elapsed / windowMs) + b.current;
    if (estimate + 1 > capacity) return { limited: true, retryAfterMs: retryAfter(b, capacity, windowMs, elapsed), remaining: 0 };
    b.current++;
    b.unsent++;
    return { limited: false, retryAfterMs: 0, remaining: Math.max(0, Math.floor(capacity - (estimate + 1))) };
  }

  /** What this node counted since it last said, at most `max` buckets' (the rest wait for the next time). */
  takeDeltas(max: number): RateLimitDelta[] {
    const out = this.outbox.splice(0, max);
    if (out.length >= max) return out;
    for (const [digest, b] of this.buckets) {
      if (b.unsent === 0) continue;
      out.push([digest, b.start, b.windowMs, b.unsent]);
      b.unsent = 0;
      if (out.length >= max) break;
    }
    return out;
  }

  /** The other nodes' counts, added to the buckets (made for those this node has not seen: its next request meets them). */
  addRemote(deltas: readonly RateLimitDelta[], now: number): void {
    for (const [digest, start, windowMs, n] of deltas) {
      const current = Math.floor(now / windowMs) * windowMs;
      // a window already over before the one before this: it counts for nothing now
      if (start < current - windowMs || start > current + windowMs) continue;
      let b = this.buckets.get(digest);
      if (!b || b.windowMs !== windowMs) {
        b = { windowMs, start, current: 0, previous: 0, unsent: 0 };
        this.keep(digest, b);
      } else if (start > b.start) this.roll(digest, b, start);
      if (start === b.start) b.current += n;
      else if (start === b.start - windowMs) b.previous += n;
    }
  }

  /** The bucket moves to the window at `start`: what this node has not told of the one ending goes out still. */
  private roll(digest: string, b: Bucket, start: number): void {
    if (b.unsent > 0) this.outbox.push([digest, b.start, b.windowMs, b.unsent]);
    // an outbox the sync cannot empty (the database gone) keeps no more than the buckets would
    if (this.outbox.length > this.maxBuckets) this.outbox.splice(0, this.outbox.length - this.maxBuckets);
    b.previous = b.start === start - b.windowMs ? b.current : 0;
    b.current = 0;
    b.unsent = 0;
    b.start = start;
  }

  private keep(digest: string, b: Bucket): void {
    this.buckets.set(digest, b);
    if (this.buckets.size > this.maxBuckets) this.buckets.delete(this.buckets.keys().next().value!);
  }
}
