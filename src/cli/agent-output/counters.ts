/**
 * The screen's connection counters, as ngrok shows them: how many requests
 * and connections came (total), how many are in flight (open), arrivals per
 * second over the last 1 and 5 minutes, and the median and 90th percentile
 * of how long the recent ones took.
 *
 * A busy tunnel brings thousands of requests a second, so recording one is
 * O(1) with no allocation: arrivals go into per-second buckets (a ring of
 * RATE_SPAN_S of them) and durations into a ring of the last
 * DURATION_SAMPLE. Rates and percentiles are worked out only when the
 * screen is drawn (at most ~10 times a second).
 */

/** The longest window a rate can be asked over: 5 minutes of one-second buckets. */
export const RATE_SPAN_S = 300;
/** Percentiles are over the durations of this many most recent requests and connections. */
export const DURATION_SAMPLE = 1000;

export interface Percentiles {
  p50: number;
  p90: number;
}

export class TrafficCounters {
  /** Requests, WebSockets and TCP connections that arrived. */
  total = 0;
  /** Of those, the ones in flight: requests not answered yet, WebSockets and TCP connections not closed. */
  open = 0;
  /** bucketSecond[i]: the second (since the epoch) whose arrivals bucketCount[i] holds. */
  private readonly bucketSecond = new Float64Array(RATE_SPAN_S).fill(-1);
  private readonly bucketCount = new Uint32Array(RATE_SPAN_S);
  private readonly durations = new Float64Array(DURATION_SAMPLE);
  /** Durations ever recorded; the next goes at recorded % DURATION_SAMPLE. */
  private recorded = 0;

  constructor(private readonly now: () => number = Date.now) {}

  /** A request, WebSocket or TCP connection arrived. */
  arrived(): void {
    this.total++;
    this.open++;
    const second = Math.floor(this.now() / 1000);
    const i = second % RATE_SPAN_S;
    if (this.bucketSecond[i] !== second) {
      // the bucket last held a second that has left every window
      this.bucketSecond[i] = second;
      this.bucketCount[i] = 0;
    }
    this.bucketCount[i]!++;
  }

  /** One in flight is over (answered, or closed) after `ms`. */
  finished(ms: number): void {
    // never below zero: an event without its arrival (a replayed request, say) must not make "open" lie
    if (this.open > 0) this.open--;
    this.durations[this.recorded % DURATION_SAMPLE] = ms;
    this.recorded++;
  }

  /** Arrivals per second over the last `seconds` (up to RATE_SPAN_S), the current second included. */
  rate(seconds: number): number {
    const span = Math.min(Math.max(1, Math.floor(seconds)), RATE_SPAN_S);
    const now = Math.floor(this.now() / 1000);
    let sum = 0;
    for (let i = 0; i < RATE_SPAN_S; i++) {
      const s = this.bucketSecond[i]!;
      if (s > now - span && s <= now) sum += this.bucketCount[i]!;
    }
    return sum / span;
  }

  /** p50 and p90 (nearest rank) of the recent durations, in ms; undefined before the first. */
  percentiles(): Percentiles | undefined {
    const n = Math.min(this.recorded, DURATION_SAMPLE);
    if (n === 0) return undefined;
    const sorted = this.durations.slice(0, n).sort();
    return { p50: sorted[Math.ceil(0.5 * n) - 1]!, p90: sorted[Math.ceil(0.9 * n) - 1]! };
  }
}
