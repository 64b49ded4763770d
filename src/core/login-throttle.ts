/**
 * Admin login throttling, on core/throttle.ts: failures are counted per
 * client address and per username; 20 from one address or 5 for one
 * username within 15 minutes lock further attempts (even with the right
 * password) for 30 s, doubling with each further failure up to 15 min.
 */
import { AppError } from "./errors.ts";
import { Throttle, type ThrottleRules } from "./throttle.ts";

export const FAILURES_PER_USERNAME = 5;
export const FAILURES_PER_ADDRESS = 20;

const RULES = {
  firstLockMs: 30 * 1000,
  maxLockMs: 15 * 60 * 1000,
  forgetAfterMs: 15 * 60 * 1000,
  maxKeys: 10_000,
} satisfies Omit<ThrottleRules, "allowance">;

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

  constructor(private readonly now: () => number = Date.now) {
    // two throttles, each with its own key cap: a spray of made-up usernames cannot push an address's count out
    this.addresses = new Throttle({ ...RULES, allowance: FAILURES_PER_ADDRESS }, now);
    this.usernames = new Throttle({ ...RULES, allowance: FAILURES_PER_USERNAME }, now);
  }

  /** Throws 429 with Retry-After while the address or the username is locked. */
  check(address: string, username: string): void {
    const until = Math.max(this.addresses.check(address), this.usernames.check(username.toLowerCase()));
    if (until === 0) return;
    this.refusals++;
    const seconds = Math.max(1, Math.ceil((until - this.now()) / 1000));
    throw new AppError("TOO_MANY_REQUESTS", `too many failed logins; try again in ${seconds} s`, {
      "Retry-After": String(seconds),
    });
  }

  fail(address: string, username: string): void {
    this.failures++;
    this.failedElsewhere(address, username);
    this.shared?.failed(address, username);
  }

  /** A correct password clears the username's count (not the address's). */
  succeed(username: string): void {
    this.succeededElsewhere(username);
    this.shared?.succeeded(username);
  }

  /** Another node's failed login counts here as one of ours. */
  failedElsewhere(address: string, username: string): void {
    this.addresses.fail(address);
    this.usernames.fail(username.toLowerCase());
  }

  succeededElsewhere(username: string): void {
    this.usernames.clear(username.toLowerCase());
  }
}
