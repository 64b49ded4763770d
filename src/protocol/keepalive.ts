/**
 * One clock for the liveness of every mux in the process, as yamux keeps
 * keepalive in the session rather than in each of its users: agents, the
 * edge's agent connections and the links between nodes all get the same
 * PING schedule and the same dead-peer rule (Mux.keepAlive()).
 *
 * One timer ticks for all of them instead of one per connection: an edge
 * with ten thousand agents holds one interval, not ten thousand, and the
 * timer exists only while some mux keeps alive. It is unref'd: liveness
 * alone never keeps a process running.
 */

/**
 * How often every kept-alive mux is looked at: a dead peer is found at most
 * this late. A mux with a shorter ping interval (tests) makes it tick at
 * half that interval.
 */
export const KEEPALIVE_TICK_MS = 1_000;

/** What the clock asks of a mux once a tick. */
export interface KeptAlive {
  /** Pings when due; fails the mux when its peer has been silent too long. */
  checkLiveness(now: number): void;
}

const kept = new Set<KeptAlive>();
let timer: ReturnType<typeof setInterval> | undefined;
let tickMs = KEEPALIVE_TICK_MS;

function tick(): void {
  const now = Date.now();
  // a check may close a mux, which removes it from the set: Set iteration allows that
  for (const m of kept) m.checkLiveness(now);
}

export function keepAlive(m: KeptAlive, intervalMs: number): void {
  kept.add(m);
  const wanted = Math.max(1, Math.min(KEEPALIVE_TICK_MS, Math.floor(intervalMs / 2)));
  if (timer && wanted >= tickMs) return;
  clearInterval(timer);
  tickMs = wanted;
  timer = setInterval(tick, tickMs);
  timer.unref();
}

export function stopKeepingAlive(m: KeptAlive): void {
  if (!kept.delete(m) || kept.size > 0 || !timer) return;
  clearInterval(timer);
  timer = undefined;
  tickMs = KEEPALIVE_TICK_MS;
}
