/**
 * A histogram as plain numbers: what the edge's hot path can afford per
 * request (a few comparisons and additions, nothing allocated). The scrape
 * turns it into Prometheus's cumulative buckets (registry.ts).
 */
export class Buckets {
  /** Observations per bucket, not cumulative; the last one is +Inf. */
  readonly counts: Float64Array;
  sum = 0;
  count = 0;

  /** `bounds`: upper bounds in ascending order, without +Inf. */
  constructor(readonly bounds: readonly number[]) {
    this.counts = new Float64Array(bounds.length + 1);
  }

  observe(value: number): void {
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]!) i++;
    this.counts[i]!++;
    this.sum += value;
    this.count++;
  }
}
