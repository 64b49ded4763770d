/**
 * Login throttling. Failures are counted per client address and per
 * username; past a free allowance each further failure locks that key for
 * twice as long as the last (30 s, 60 s, ... up to 15 min). A key forgets its
 * failures 15 minutes after the last one. Memory is bounded: the oldest keys
 * are dropped first.
 */
import { AppError } from "./errors.ts";

export const FAILURES_PER_USERNAME = 5;
export const FAILURES_PER_ADDRESS = 20;
const FIRST_LOCK_MS = 30 * 1000;
const MAX_LOCK_MS = 15 * 60 * 1000;
const FORGET_AFTER_MS = 15 * 60 * 1000;
const MAX_KEYS = 10_000;

interface Entry {
  failures: number;
  lastFailure: number;
  lockedUntil: number;
}

export class LoginThrottle {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Throws 429 with Retry-After while the address or the username is locked. */
  check(address: string, username: string): void {
    const t = this.now();
    const until = Math.max(this.lockedUntil(`a:${address}`, t), this.lockedUntil(`u:${username.toLowerCase()}`, t));
    if (until > t) {
      const seconds = Math.ceil((until - t) / 1000);
      throw new AppError("TOO_MANY_REQUESTS", `too many failed logins; try again in ${seconds} s`, {
        "Retry-After": String(seconds),
      });
    }
  }

  fail(address: string, username: string): void {
    this.bump(`a:${address}`, FAILURES_PER_ADDRESS);
    this.bump(`u:${username.toLowerCase()}`, FAILURES_PER_USERNAME);
  }

  /** A correct password clears the username's count (not the address's). */
  succeed(username: string): void {
    this.entries.delete(`u:${username.toLowerCase()}`);
  }

  private lockedUntil(key: string, t: number): number {
    const e = this.entries.get(key);
    if (!e) return 0;
    if (t - e.lastFailure > FORGET_AFTER_MS && t >= e.lockedUntil) {
      this.entries.delete(key);
      return 0;
    }
    return e.lockedUntil;
  }

  private bump(key: string, allowance: number): void {
    const t = this.now();
    let e = this.entries.get(key);
    if (!e || (t - e.lastFailure > FORGET_AFTER_MS && t >= e.lockedUntil)) e = { failures: 0, lastFailure: t, lockedUntil: 0 };
    this.entries.delete(key); // re-insert: Map order doubles as least-recently-failed order
    e.failures++;
    e.lastFailure = t;
    const over = e.failures - allowance;
    if (over >= 0) e.lockedUntil = t + Math.min(MAX_LOCK_MS, FIRST_LOCK_MS * 2 ** Math.min(over, 10));
    this.entries.set(key, e);
    while (this.entries.size > MAX_KEYS) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
  }
}
