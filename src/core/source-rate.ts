/**
 * How much each source may send or draw, and all of them together: token
 * buckets, refilled continuously, one token a packet. Over UDP anyone can
 * forge the source address of a packet, so an answer may go to someone who
 * never asked; these buckets bound what a forged flood can draw at one
 * victim (its bucket) and, when a total is set, at all of them together.
 * The DNS responder takes one per answer; a udp tunnel one per visitor
 * datagram. A packet over the limit gets nothing at all, which a real
 * client takes as a lost packet.
 *
 * Sources are keyed as the throttles key clients (an IPv6 address by its
 * /64, http/addresses.ts). Memory is bounded: past `maxClients` the source
 * idle longest is forgotten (its next packet starts from a full bucket,
 * which the total, where there is one, still bounds).
 */
import { clientKey } from "../http/addresses.ts";

interface Bucket {
  tokens: number;
  /** When `tokens` was last brought up to date (ms). */
  at: number;
}

export interface SourceRateLimits {
  perClientPerSecond: number;
  perClientBurst: number;
  /** All sources together; none: no total. */
  totalPerSecond?: number;
  totalBurst?: number;
  maxClients: number;
}

export class SourceRate {
  /** client key -> bucket, least recently used first. */
  private readonly clients = new Map<string, Bucket>();
  private readonly total?: Bucket;

  constructor(
    private readonly limits: SourceRateLimits,
    private readonly now: () => number = () => performance.now(),
  ) {
    if (limits.totalBurst !== undefined) this.total = { tokens: limits.totalBurst, at: now() };
  }

  /** Takes a token for a packet from (or an answer to) `address`; false: over a limit, send nothing. */
  take(address: string): boolean {
    return this.takeFor(clientKey(address));
  }

  /** The key `address` is counted under, for a caller that keeps it (takeFor). */
  keyOf(address: string): string {
    return clientKey(address);
  }

  /** take() for an address already keyed. */
  takeFor(key: string): boolean {
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
    const total = this.total;
    if (total) refill(total, t, this.limits.totalPerSecond ?? 0, this.limits.totalBurst ?? 0);
    if (bucket.tokens < 1 || (total && total.tokens < 1)) return false;
    bucket.tokens--;
    if (total) total.tokens--;
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
