/**
 * Traffic counted in memory per user and written to the daily table in
 * batches: every FLUSH_INTERVAL_MS, when a tunnel closes and at shutdown.
 */
import { logFailedWrite } from "../db/unavailable.ts";
import { utcDate } from "../core/clock.ts";
import type { Core } from "../core/index.ts";
import { log } from "../log.ts";

export const FLUSH_INTERVAL_MS = 2_000;

export class TrafficMeter {
  private pending = new Map<number, { in: number; out: number }>();
  /** Taken by a flush whose writes are under way: still unwritten, so still counted by unflushed(). */
  private writing = new Map<number, number>();
  /** Bytes counted since start, all users together (the metrics' tunnel bytes). */
  totalIn = 0;
  totalOut = 0;
  /** Called after each flush that wrote something: how long it took, rows written, rows that failed. */
  onFlush?: (seconds: number, rows: number, errors: number) => void;

  constructor(private readonly core: Core) {}

  add(userId: number, bytesIn: number, bytesOut: number): void {
    let p = this.pending.get(userId);
    if (!p) this.pending.set(userId, (p = { in: 0, out: 0 }));
    p.in += bytesIn;
    p.out += bytesOut;
    this.totalIn += bytesIn;
    this.totalOut += bytesOut;
  }

  unflushed(userId: number): number {
    const p = this.pending.get(userId);
    return (p ? p.in + p.out : 0) + (this.writing.get(userId) ?? 0);
  }

  /** Writes what was counted; a user deleted meanwhile is skipped (their rows are gone by design). */
  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const started = performance.now();
    const batch = this.pending;
    this.pending = new Map();
    for (const [userId, p] of batch) this.writing.set(userId, (this.writing.get(userId) ?? 0) + p.in + p.out);
    const date = utcDate(this.core.clock.now());
    let rows = 0;
    let errors = 0;
    for (const [userId, p] of batch) {
      if (p.in === 0 && p.out === 0) continue;
      try {
        await this.core.traffic.add(userId, date, p.in, p.out);
        rows++;
      } catch (err) {
        // a foreign key failure means the user was deleted: their traffic goes with them
        if (!/foreign key/i.test(String(err))) {
          errors++;
          logFailedWrite("traffic flush failed", { user: userId }, err);
        }
      } finally {
        const left = (this.writing.get(userId) ?? 0) - p.in - p.out;
        if (left > 0) this.writing.set(userId, left);
        else this.writing.delete(userId);
      }
    }
    if (rows + errors > 0) this.onFlush?.((performance.now() - started) / 1000, rows, errors);
  }
}
