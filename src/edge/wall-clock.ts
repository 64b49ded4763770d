/**
 * The wall clock (ms since the epoch, as Date.now() gives it) at a moment
 * the edge has already read on its monotonic clock (performance.now(): a
 * visit's startedAt), without reading a clock again: a clock read costs
 * tens of nanoseconds on some hosts, as much as a policy's condition. The
 * two clocks' offset is taken again once a second, so a step of the wall
 * clock (NTP, an operator's change) reaches what this says within one.
 */

const RECHECK_MS = 1000;

let offset = Date.now() - performance.now();
let checkedAt = performance.now();

/** Whole ms since the epoch at `monotonic` (a performance.now() reading of this turn or one shortly before). */
export function wallClockAt(monotonic: number): number {
  if (monotonic - checkedAt >= RECHECK_MS) {
    const mono = performance.now();
    offset = Date.now() - mono;
    checkedAt = mono;
  }
  return Math.floor(monotonic + offset);
}
