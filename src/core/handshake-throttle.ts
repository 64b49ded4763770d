/**
 * Agents' failed handshakes, counted per client address on core/throttle.ts.
 * A failure is a HELLO that proves no working token: AUTH_FAILED,
 * TOKEN_DISABLED, or a HELLO that is not valid JSON of the right shape
 * (PROTOCOL_ERROR). `limit` failures from one address with less than a
 * minute between them lock it: its handshakes are refused with RATE_LIMITED
 * before the token is looked at, for 30 s, doubling with each failure after
 * a lock up to 15 min. A successful handshake clears nothing: whoever
 * guesses tokens may well hold a valid one too.
 */
import { AppError } from "./errors.ts";
import { Throttle } from "./throttle.ts";

/** The codes that count as a failed handshake. */
export const HANDSHAKE_FAILURES: ReadonlySet<string> = new Set(["AUTH_FAILED", "TOKEN_DISABLED", "PROTOCOL_ERROR"]);

const RULES = {
  forgetAfterMs: 60 * 1000,
  // longer than the longest lock, so an address that comes back as each lock ends stays at 15 min
  forgetLockedAfterMs: 30 * 60 * 1000,
  firstLockMs: 30 * 1000,
  maxLockMs: 15 * 60 * 1000,
  maxKeys: 10_000,
};

export class HandshakeThrottle {
  private readonly throttle: Throttle;

  constructor(
    limit: number,
    private readonly now: () => number = Date.now,
  ) {
    this.throttle = new Throttle({ ...RULES, allowance: limit }, now);
  }

  /** RATE_LIMITED (with Retry-After in seconds) while the address is locked; else undefined. */
  refusal(address: string): AppError | undefined {
    const until = this.throttle.check(address);
    if (until === 0) return undefined;
    const seconds = Math.max(1, Math.ceil((until - this.now()) / 1000));
    return new AppError("RATE_LIMITED", `too many failed handshakes from ${address}; try again in ${seconds} s`, {
      "Retry-After": String(seconds),
    });
  }

  /** Counts a refusal with `code` against the address, if it is a failure; true when this one locked it. */
  failed(address: string, code: string): boolean {
    return HANDSHAKE_FAILURES.has(code) && this.throttle.fail(address) > 0;
  }
}
