/**
 * Keyed failure counters with cool-downs: the one mechanism behind every
 * throttle in burrow (admin and portal logins by address and by username,
 * agents' handshakes by address, tunnels' basic auth, device codes,
 * invitation links). Each key counts its failures; once they reach the
 * allowance the key is locked for `firstLockMs`, and each further failure
 * after a lock has ended locks it for twice as long as the last, up to
 * `maxLockMs`. While a key is locked its owner is refused without being
 * heard, so the refusals themselves never count.
 *
 * An attempt is reserved before its secret is checked, and counts as a
 * failure until it is settled: a check that takes time (a password's
 * argon2, a database lookup) cannot be raced by a burst of attempts that
 * all pass before the first one fails. reserve() hands out a ticket only
 * while the failures and the attempts in flight together leave room in the
 * allowance (one at a time once the key has been locked); the ticket then
 * says how the attempt ended: succeeded() gives the reservation back,
 * failed() turns it into a failure, and disposing of an unsettled ticket
 * (`using`) gives it back too, for an attempt that ended with neither (an
 * error, a client gone). There is no other way to count a failure of this
 * node's, so no check can come apart from its count. reserveInTurn() is the
 * same for a caller that may wait: an attempt that finds the allowance
 * taken by attempts in flight waits for them to be judged rather than
 * being refused, so a burst of good attempts is served in turn and a burst
 * of bad ones meets the lock.
 *
 * A key forgets its failures once it is unlocked and has had none for
 * `forgetAfterMs` (`forgetLockedAfterMs` if it was ever locked, so that a
 * peer coming back the moment each lock ends keeps doubling it rather than
 * starting afresh). Memory is bounded: past `maxKeys` the key whose last
 * failure is oldest is dropped first; attempts in flight are counted apart
 * (as many as the requests being served), so reserving never pushes a
 * key's failures out.
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

/** One attempt, reserved: it counts as a failure of its key until it is settled. */
export interface Ticket extends Disposable {
  /** The attempt proved its secret: the reservation is given back. */
  succeeded(): void;
  /** The attempt was wrong: counted as a failure; returns when the key's lock ends if this one locked it, else 0. */
  failed(): number;
  /** Gives the reservation back if the ticket was not settled (an attempt that ended in an error, or went unjudged). */
  [Symbol.dispose](): void;
}

/**
 * A ticket, or why not: `locked` while the key is locked (`retryAt` is when
 * the lock ends), else the allowance is taken by attempts in flight (retry
 * in a moment: they are being judged now).
 */
export type Reservation = { ticket: Ticket } | { ticket?: undefined; retryAt: number; locked: boolean };

/** How long an attempt that waits its turn may wait before it is refused as the key's attempts in flight. */
export const TURN_WAIT_MS = 10_000;
/** Attempts that may wait their turn on one key; more are refused at once. */
export const MAX_WAITING_PER_KEY = 1_024;
/** What a refusal for attempts in flight (not a lock) says to wait. */
const IN_FLIGHT_RETRY_MS = 1_000;

interface Entry {
  failures: number;
  lastFailure: number;
  /** When the latest lock ends; 0 while the key has never been locked. */
  lockedUntil: number;
}

export class Throttle {
  /** Keys with failures, least recently failed first. */
  private readonly entries = new Map<string, Entry>();
  /** Attempts reserved and not settled yet, by key: apart from the failures, so a reservation never pushes a key's failures out. */
  private readonly inFlight = new Map<string, number>();
  /** Attempts waiting their turn, by key (reserveInTurn), woken when an attempt of the key is settled. */
  private readonly waiting = new Map<string, (() => void)[]>();

  constructor(
    private readonly rules: ThrottleRules,
    private readonly now: () => number = Date.now,
  ) {}

  /** Reserves an attempt on `key`, or says why not (locked, or the allowance taken by attempts in flight). */
  reserve(key: string): Reservation {
    const refused = this.refusal(key, this.now());
    if (refused) return refused;
    this.inFlight.set(key, (this.inFlight.get(key) ?? 0) + 1);
    return { ticket: this.ticket(key) };
  }

  /**
   * reserve(), waiting while attempts in flight take the allowance (up to
   * `maxWaitMs`, and MAX_WAITING_PER_KEY waiting at once): refused at once
   * only while the key is locked, or when it has been locked meanwhile.
   */
  async reserveInTurn(key: string, maxWaitMs = TURN_WAIT_MS): Promise<Reservation> {
    const deadline = performance.now() + maxWaitMs;
    for (;;) {
      const r = this.reserve(key);
      const left = deadline - performance.now();
      if (r.ticket || r.locked || left <= 0) return r;
      const queue = this.waiting.get(key) ?? [];
      if (queue.length >= MAX_WAITING_PER_KEY) return r;
      if (queue.length === 0) this.waiting.set(key, queue);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(wake, left);
        function wake() {
          clearTimeout(timer);
          const i = queue.indexOf(wake);
          if (i >= 0) queue.splice(i, 1);
          resolve();
        }
        queue.push(wake);
      });
    }
  }

  /**
   * For a check that answers at once (nothing to race, so nothing to
   * reserve): refused while the key is locked, or its allowance is taken by
   * attempts in flight; else `check` runs, and its `false` counts as a
   * failure (`undefined`: no attempt was made, e.g. no credentials sent,
   * which counts nothing). `check` must not be async: a promise is no verdict.
   */
  judgeNow(key: string, check: () => boolean | undefined): { passed: boolean | undefined; retryAt?: undefined } | { passed?: undefined; retryAt: number } {
    const t = this.now();
    const refused = this.refusal(key, t);
    if (refused) return { retryAt: refused.retryAt };
    const passed = check();
    if (passed === false) this.countFailure(key, t);
    return { passed };
  }

  /** Counts a failure judged elsewhere (another node's, told to this one); returns when the key's lock ends if it locked it, else 0. */
  /** The failures counted for `key` now (0 once forgotten). */
  failuresOf(key: string): number {
    return this.current(key, this.now())?.failures ?? 0;
  }

  addFailure(key: string): number {
    return this.countFailure(key, this.now());
  }

  /**
   * An attempt that counts whatever its outcome (a rate, not a guess: codes
   * asked for): refused while the key is locked (returns when it ends),
   * else counted at once (returns 0).
   */
  take(key: string): number {
    const r = this.reserve(key);
    if (!r.ticket) return r.retryAt;
    r.ticket.failed();
    return 0;
  }

  /** Forgets the key's failures and lock (its attempts in flight still count until settled). */
  clear(key: string): void {
    this.entries.delete(key);
    this.wake(key);
  }

  /** Keys with failures tracked now (for tests of the memory bound). */
  get size(): number {
    return this.entries.size;
  }

  /** Why an attempt on `key` may not be made now, or undefined. */
  private refusal(key: string, t: number): { retryAt: number; locked: boolean } | undefined {
    const e = this.current(key, t);
    if (e && e.lockedUntil > t) return { retryAt: e.lockedUntil, locked: true };
    if ((this.inFlight.get(key) ?? 0) >= this.room(e)) return { retryAt: t + IN_FLIGHT_RETRY_MS, locked: false };
    return undefined;
  }

  /** Attempts that may be in flight on a key at once: what is left of the allowance, one at a time once it has been used up. */
  private room(e: Entry | undefined): number {
    return Math.max(1, this.rules.allowance - (e?.failures ?? 0));
  }

  private ticket(key: string): Ticket {
    let settled = false;
    const settle = () => {
      if (settled) return false;
      settled = true;
      const n = (this.inFlight.get(key) ?? 1) - 1;
      if (n > 0) this.inFlight.set(key, n);
      else this.inFlight.delete(key);
      return true;
    };
    const giveBack = () => {
      if (settle()) this.wake(key);
    };
    return {
      succeeded: giveBack,
      failed: () => {
        if (!settle()) return 0;
        const locked = this.countFailure(key, this.now());
        this.wake(key);
        return locked;
      },
      [Symbol.dispose]: giveBack,
    };
  }

  private countFailure(key: string, t: number): number {
    const e = this.current(key, t) ?? { failures: 0, lastFailure: t, lockedUntil: 0 };
    this.entries.delete(key); // re-inserted below: Map order doubles as least-recently-failed order
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

  /** Wakes the attempts waiting on `key` that may now have room, or all of them when it is locked (they are refused). */
  private wake(key: string): void {
    const queue = this.waiting.get(key);
    if (!queue) return;
    const t = this.now();
    const e = this.current(key, t);
    let free = e && e.lockedUntil > t ? queue.length : this.room(e) - (this.inFlight.get(key) ?? 0);
    while (free-- > 0 && queue.length > 0) queue[0]!();
    if (queue.length === 0) this.waiting.delete(key);
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

/**
 * reserveInTurn() on several throttles for one attempt (an address and a
 * username, say), in the order given: one ticket that settles them all, or
 * the first refusal (what was reserved before it is given back). Keep one
 * order for a pair everywhere: then two attempts never wait on each other.
 */
export async function reserveEachInTurn(keys: readonly (readonly [Throttle, string])[]): Promise<Reservation> {
  const tickets: Ticket[] = [];
  try {
    for (const [throttle, key] of keys) {
      const r = await throttle.reserveInTurn(key);
      if (!r.ticket) {
        for (const t of tickets) t[Symbol.dispose]();
        return r;
      }
      tickets.push(r.ticket);
    }
  } catch (err) {
    for (const t of tickets) t[Symbol.dispose]();
    throw err;
  }
  return {
    ticket: {
      succeeded: () => tickets.forEach((t) => t.succeeded()),
      failed: () => Math.max(0, ...tickets.map((t) => t.failed())),
      [Symbol.dispose]: () => tickets.forEach((t) => t[Symbol.dispose]()),
    },
  };
}
