/**
 * An allowance of events a second, for the flood defences: a bucket that
 * holds up to two seconds' worth and is refilled a second's worth by the
 * connections' sweep each second. Taking from it is a decrement: nothing
 * reads a clock per frame.
 */
export class Budget {
  private left: number;
  private readonly most: number;

  constructor(private readonly perSecond: number) {
    this.most = perSecond * 2;
    this.left = this.most;
  }

  /** One more event; false once the allowance is spent. */
  take(): boolean {
    return --this.left >= 0;
  }

  /** A second has passed. */
  refill(): void {
    this.left = Math.min(this.most, Math.max(this.left, 0) + this.perSecond);
  }
}
