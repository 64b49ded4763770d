/**
 * One circuit breaker's state (the circuit-breaker action's, one per rule
 * of a loaded policy, in this process): the outcomes of the requests it
 * let through, counted in a rolling window of `buckets` buckets, and
 * whether it is tripped. Closed, it lets every request through and trips
 * when, over the window, at least `volumeThreshold` requests ended and
 * the share of them that failed (a 5xx, or no response) reaches
 * `errorThreshold`. Tripped, it lets none through for `trippedMs`; then
 * one request goes through to try the service (half-open): its success
 * closes the breaker with the window emptied, its failure trips it again.
 * Memory is fixed: two counts and a stamp per bucket.
 */
export interface BreakerSettings {
  errorThreshold: number;
  volumeThreshold: number;
  windowMs: number;
  trippedMs: number;
  buckets: number;
}

/** What the breaker says of a request that comes. */
export type Admission =
  /** Let through, counted when its outcome is told. */
  | "pass"
  /** Let through as the one that tries the service after the breaker was tripped. */
  | "probe"
  /** Tripped: refused. */
  | "refuse";

export class Breaker {
  private readonly width: number;
  /** Per bucket: the window-relative index of the bucket it holds (-Infinity: none), its requests and its failures. */
  private readonly stamps: Float64Array;
  private readonly totals: Float64Array;
  private readonly failures: Float64Array;
  /** Until when it refuses (ms since the epoch); 0: closed. */
  private trippedUntil = 0;
  /** When the request trying the service went through, while its outcome is awaited (0: none). */
  private probeSince = 0;

  constructor(readonly settings: BreakerSettings) {
    this.width = settings.windowMs / settings.buckets;
    this.stamps = new Float64Array(settings.buckets).fill(-Infinity);
    this.totals = new Float64Array(settings.buckets);
    this.failures = new Float64Array(settings.buckets);
  }

  /** Whether it is tripped at `now` (refusing, or waiting on the request that tries the service). */
  tripped(now: number): boolean {
    return this.trippedUntil !== 0 && (now < this.trippedUntil || this.probeSince !== 0);
  }

  /** Ms until a tripped breaker next lets a request try the service (0 when it would now). */
  retryAfter(now: number): number {
    return Math.max(0, this.trippedUntil - now);
  }

  /** Whether a request that comes at `now` goes through. */
  admit(now: number): Admission {
    if (this.trippedUntil === 0) return "pass";
    if (now < this.trippedUntil) return "refuse";
    // one request at a time tries the service; one whose outcome is never told (it was refused later on) is given up after trippedMs
    if (this.probeSince !== 0 && now - this.probeSince < this.settings.trippedMs) return "refuse";
    this.probeSince = now;
    return "probe";
  }

  /** A request let through ended at `now`: `failed` when its response was a 5xx or none came. */
  record(admission: Admission, failed: boolean, now: number): void {
    if (admission === "probe") {
      this.probeSince = 0;
      if (failed) this.trippedUntil = now + this.settings.trippedMs;
      else this.close();
      return;
    }
    // a request let through before the breaker tripped, ending after: the window was emptied when it tripped
    if (this.trippedUntil !== 0) return;
    const index = Math.floor(now / this.width);
    const slot = index % this.settings.buckets;
    if (this.stamps[slot] !== index) {
      this.stamps[slot] = index;
      this.totals[slot] = 0;
      this.failures[slot] = 0;
    }
    this.totals[slot]! += 1;
    if (failed) this.failures[slot]! += 1;
    const [total, failures] = this.counts(now);
    if (total >= this.settings.volumeThreshold && failures / total >= this.settings.errorThreshold) this.trip(now);
  }

  /** A probe whose outcome will not be told (the visitor left first): another may try. */
  release(admission: Admission): void {
    if (admission === "probe") this.probeSince = 0;
  }

  /** The requests and failures in the window that ends at `now`. */
  counts(now: number): [number, number] {
    const index = Math.floor(now / this.width);
    let total = 0;
    let failures = 0;
    for (let i = 0; i < this.settings.buckets; i++) {
      const stamp = this.stamps[i]!;
      if (stamp > index - this.settings.buckets && stamp <= index) {
        total += this.totals[i]!;
        failures += this.failures[i]!;
      }
    }
    return [total, failures];
  }

  private trip(now: number): void {
    this.trippedUntil = now + this.settings.trippedMs;
    this.probeSince = 0;
    this.stamps.fill(-Infinity);
  }

  private close(): void {
    this.trippedUntil = 0;
    this.stamps.fill(-Infinity);
  }
}
