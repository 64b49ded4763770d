/**
 * One clock for every HTTP/2 connection's time limits and flood budgets: a
 * sweep a second over the open connections (as HTTP/1.1's connections have
 * theirs), never a timer per connection or stream. Unref'd: it keeps no
 * process alive.
 */
import { H2_SWEEP_MS } from "./limits.ts";

export interface Swept {
  /** A second went by; `now` is performance.now(). */
  tick(now: number): void;
}

const watched = new Set<Swept>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweep(): void {
  const now = performance.now();
  for (const c of watched) c.tick(now);
}

export function watch(c: Swept): void {
  watched.add(c);
  if (sweeper !== undefined) return;
  sweeper = setInterval(sweep, H2_SWEEP_MS);
  sweeper.unref();
}

export function unwatch(c: Swept): void {
  watched.delete(c);
}
