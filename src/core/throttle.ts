/**
 * Keyed failure counters with cool-downs: the one mechanism behind every
 * throttle in burrow (admin logins by address and by username, agents'
 * handshakes by address). Each key counts its failures; once they reach
 * the allowance the key is locked for `firstLockMs`, and each further
 * failure after a lock has ended locks it for twice as long as the last,
 * up to `maxLockMs`. While a key is locked its owner is refused without
 * being heard, so the refusals themselves never count.
 *
 * A key forgets its failures once it is unlocked and has had none for
 * `forgetAfterMs` (`forgetLockedAfterMs` if it was ever locked, so that a
 * peer coming back the moment each lock ends keeps doubling it rather than
 * starting afresh). Memory is bounded: past `maxKeys` the key whose last
 * failure is oldest is dropped first.
 */

export interface ThrottleRules {
  /** Failures a key may make before it is locked (the one that reaches it locks). */
  allowance: number;
  /** An unlocked key with no failure for this long starts from zero again. */
  forgetAfterMs: number;
  /** The same for a key that has been locked; default `forgetAfterMs`. */
  forgetLockedAfterMs?: number;
  firstLockMs: number;
  maxLockMs: number;
  maxKeys: number;
}

interface Entry {
  failures: number;
  lastFailure: number;
  /** When the latest lock ends; 0 while the key has never been locked. */
  lockedUntil: number;
}

export class Throttle {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly rules: ThrottleRules,
    private readonly now: () => number = Date.now,
  ) {}

  /** When the key's lock ends (ms since the epoch), or 0 when it is not locked now. */
  check(key: string): number {
    const t = this.now();
    const until = this.current(key, t)?.lockedUntil ?? 0;
    return until > t ? until : 0;
  }

  /** Counts a failure; returns when the key's lock ends if this failure locked it, else 0. */
  fail(key: string): number {
    const t = this.now();
    const e = this.current(key, t) ?? { failures: 0, lastFailure: t, lockedUntil: 0 };
    this.entries.delete(key); // re-insert: Map order doubles as least-recently-failed order
    e.failures++;
    e.lastFailure = t;
    const over = e.failures - this.rules.allowance;
    let locked = 0;
    if (over >= 0) {
      locked = t + Math.min(this.rules.maxLockMs, this.rules.firstLockMs * 2 ** Math.min(over, 10));
      e.lockedUntil = locked;
    }
    this.entries.set(key, e);
    while (this.entries.size > this.rules.maxKeys) {
      const oldest = this.entries.keys().next().value;
      if (oldest === undefined) break;
      this.entries.delete(oldest);
    }
    return locked;
  }

  /** Forgets the key's failures and lock. */
  clear(key: string): void {
    this.entries.delete(key);
  }

  /** Keys tracked now (for tests of the memory bound). */
  get size(): number {
    return this.entries.size;
  }

  /** The key's entry, or undefined once it has been forgotten (which drops it). */
  private current(key: string, t: number): Entry | undefined {
    const e = this.entries.get(key);
    if (!e) return undefined;
    const forgetAfter = e.lockedUntil > 0 ? (this.rules.forgetLockedAfterMs ?? this.rules.forgetAfterMs) : this.rules.forgetAfterMs;
    if (t - e.lastFailure > forgetAfter && t >= e.lockedUntil) {
      this.entries.delete(key);
      return undefined;
    }
    return e;
  }
}
