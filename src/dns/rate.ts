/**
 * How many answers the DNS responder sends, per client and in all: token
 * buckets, refilled continuously, one token an answer. Over UDP anyone can
 * forge the source address of a query, so an answer may go to someone who
 * never asked; these buckets bound what a forged flood can draw at one
 * victim (its bucket) and at all of them together (the total). A query over
 * the limit gets nothing at all, which a real resolver takes as a lost
 * packet and asks again.
 *
 * Memory is bounded: past `maxClients` the client idle longest is forgotten
 * (its next query starts from a full bucket, which the total still bounds).
 */
import { clientKey } from "../http/addresses.ts";
import type { DnsLimits } from "./wire.ts";

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date (ms). */
  at: number;
}

export type RateLimits = Pick<DnsLimits, "perClientPerSecond" | "perClientBurst" | "totalPerSecond" | "totalBurst" | "maxClients">;

export class AnswerRate {
  /** client key -> bucket, least recently used first. */
  private readonly clients = new Map<string, Bucket>();
  private readonly total: Bucket;

  constructor(
    private readonly limits: RateLimits,
    private readonly now: () => number = () => performance.now(),
  ) {
    this.total = { tokens: limits.totalBurst, at: now() };
  }

  /** Takes a token for an answer to `address`; false: over a limit, send nothing. */
  take(address: string): boolean {
    const key = clientKey(address);
    const t = this.now();
    const bucket = this.clients.get(key) ?? { tokens: this.limits.perClientBurst, at: t };
    this.clients.delete(key); // re-inserted below: Map order doubles as least-recently-used order
    this.clients.set(key, bucket);
    while (this.clients.size > this.limits.maxClients) {
      const oldest = this.clients.keys().next().value;
      if (oldest === undefined) break;
      this.clients.delete(oldest);
    }
    refill(bucket, t, this.limits.perClientPerSecond, this.limits.perClientBurst);
    refill(this.total, t, this.limits.totalPerSecond, this.limits.totalBurst);
    if (bucket.tokens < 1 || this.total.tokens < 1) return false;
    bucket.tokens--;
    this.total.tokens--;
    return true;
  }

  /** Clients tracked now (for tests of the memory bound). */
  get size(): number {
    return this.clients.size;
  }
}

function refill(b: Bucket, t: number, perSecond: number, burst: number): void {
  b.tokens = Math.min(burst, b.tokens + ((t - b.at) * perSecond) / 1000);
  b.at = t;
}
