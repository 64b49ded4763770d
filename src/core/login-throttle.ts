/**
 * Admin and portal login throttling, on core/throttle.ts: failures are
 * counted per client address and per username; 20 from one address or 5
 * for one username within 15 minutes lock further attempts (even with the
 * right password) for 30 s, doubling with each further failure up to 15 min.
 *
 * A login is reserved before its password is verified and counts as a
 * failure until it succeeds: of a burst of logins for one username, 5 are
 * verified and the rest wait for their verdicts, so a burst of wrong
 * passwords meets the lock (429) and the right one sent after them is
 * refused like any other while it lasts.
 */
import { clientKey } from "../http/addresses.ts";
import { AppError } from "./errors.ts";
import { reserveEachInTurn, Throttle, type Reservation, type Ticket, type ThrottleRules } from "./throttle.ts";

export const FAILURES_PER_USERNAME = 5;
export const FAILURES_PER_ADDRESS = 20;

const RULES = {
  firstLockMs: 30 * 1000,
  maxLockMs: 15 * 60 * 1000,
  forgetAfterMs: 15 * 60 * 1000,
  maxKeys: 10_000,
} satisfies Omit<ThrottleRules, "allowance">;

/** A login being verified: say how it ended, or let `using` give it back (an error, no verdict). */
export interface LoginAttempt extends Disposable {
  /** The password was right: the username's count is cleared (not the address's). */
  succeeded(): void;
  /** A wrong username or password: a failure of the address and of the username. */
  failed(): void;
}

export class LoginThrottle {
  private readonly addresses: Throttle;
  private readonly usernames: Throttle;
  /** Since start, for the metrics: wrong usernames or passwords, and attempts refused while locked. */
  failures = 0;
  refusals = 0;
  /**
   * Told of each failure and success here, so that other nodes count them
   * too (cluster/cluster.ts); what they tell comes back through
   * failedElsewhere and succeededElsewhere.
   */
  shared?: { failed(address: string, username: string): void; succeeded(username: string): void };
  /**
   * Told when a failure here locks the address or the username (the
   * login.failed_burst event): the failures counted, and for how long the
   * lock lasts.
   */
  onBurst?: (burst: { address: string; username: string; failures: number; lockedForS: number }) => void;

  constructor(private readonly now: () => number = Date.now) {
    // two throttles, each with its own key cap: a spray of made-up usernames cannot push an address's count out
    this.addresses = new Throttle({ ...RULES, allowance: FAILURES_PER_ADDRESS }, now);
    this.usernames = new Throttle({ ...RULES, allowance: FAILURES_PER_USERNAME }, now);
  }

  /**
   * Reserves a login for the address and the username, waiting its turn
   * while their attempts in flight take the allowance; 429 with Retry-After
   * while either is locked. Always the address first, then the username:
   * one order, so two logins never wait on each other.
   */
  async reserve(address: string, username: string): Promise<LoginAttempt> {
    const name = username.toLowerCase();
    const r = await reserveEachInTurn([
      // an IPv6 client is counted by its /64, as one IPv4 address (http/addresses.ts)
      [this.addresses, clientKey(address)],
      [this.usernames, name],
    ]);
    if (!r.ticket) throw this.refused(r);
    return this.attempt(address, name, r.ticket);
  }

  /** Another node's failed login counts here as one of ours. */
  failedElsewhere(address: string, username: string): void {
    this.addresses.addFailure(clientKey(address));
    this.usernames.addFailure(username.toLowerCase());
  }

  succeededElsewhere(username: string): void {
    this.usernames.clear(username.toLowerCase());
  }

  private attempt(address: string, name: string, ticket: Ticket): LoginAttempt {
    let settled = false;
    const once = () => !settled && (settled = true);
    return {
      succeeded: () => {
        if (!once()) return;
        ticket.succeeded();
        this.usernames.clear(name);
        this.shared?.succeeded(name);
      },
      failed: () => {
        if (!once()) return;
        this.failures++;
        const lockedUntil = ticket.failed();
        this.shared?.failed(address, name);
        if (lockedUntil > 0 && this.onBurst) {
          const failures = Math.max(this.addresses.failuresOf(clientKey(address)), this.usernames.failuresOf(name));
          this.onBurst({ address, username: name, failures, lockedForS: Math.max(1, Math.round((lockedUntil - this.now()) / 1000)) });
        }
      },
      [Symbol.dispose]: () => {
        if (!once()) return;
        ticket[Symbol.dispose]();
      },
    };
  }

  private refused(r: Exclude<Reservation, { ticket: Ticket }>): AppError {
    this.refusals++;
    const seconds = Math.max(1, Math.ceil((r.retryAt - this.now()) / 1000));
    const why = r.locked ? "too many failed logins" : "too many logins being checked at once";
    return new AppError("TOO_MANY_REQUESTS", `${why}; try again in ${seconds} s`, { "Retry-After": String(seconds) });
  }
}
