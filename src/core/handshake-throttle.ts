/**
 * Agents' failed handshakes, counted per client address on core/throttle.ts.
 * A failure is a HELLO that proves no working token: AUTH_FAILED,
 * TOKEN_DISABLED, or a HELLO that is not valid JSON of the right shape
 * (PROTOCOL_ERROR). `limit` failures from one address with less than a
 * minute between them lock it: its handshakes are refused with RATE_LIMITED
 * before the token is looked at, for 30 s, doubling with each failure after
 * a lock up to 15 min. A successful handshake clears nothing: whoever
 * guesses tokens may well hold a valid one too.
 *
 * A handshake is reserved before its token is looked up and counts as a
 * failure until it ends otherwise: of many HELLOs from one address at once,
 * `limit` are judged and the others wait for their verdicts (a fleet behind
 * one address reconnecting after a restart comes in, in turns; a burst of
 * guesses meets the lock).
 */
import { AppError } from "./errors.ts";
import { Throttle, type Reservation } from "./throttle.ts";

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

/** A handshake being judged: ended() with its result, or given back by `using` (the connection went first). */
export interface HandshakeTicket extends Disposable {
  /** The handshake's result (READY, MOVE, or a refusal's code): a failure's code counts against the address; anything else gives the reservation back. */
  ended(result: string): void;
}

export class HandshakeThrottle {
  private readonly throttle: Throttle;

  constructor(
    limit: number,
    private readonly now: () => number = Date.now,
  ) {
    this.throttle = new Throttle({ ...RULES, allowance: limit }, now);
  }

  /** A ticket for a HELLO from `address`, once its turn comes; RATE_LIMITED (with Retry-After in seconds) while the address is locked. */
  async reserve(address: string): Promise<{ ticket: HandshakeTicket; refusal?: undefined } | { ticket?: undefined; refusal: AppError }> {
    const r = await this.throttle.reserveInTurn(address);
    if (!r.ticket) return { refusal: this.refusal(address, r) };
    const ticket = r.ticket;
    return {
      ticket: {
        ended: (result) => (HANDSHAKE_FAILURES.has(result) ? void ticket.failed() : ticket.succeeded()),
        [Symbol.dispose]: () => ticket[Symbol.dispose](),
      },
    };
  }

  private refusal(address: string, r: Exclude<Reservation, { ticket: object }>): AppError {
    const seconds = Math.max(1, Math.ceil((r.retryAt - this.now()) / 1000));
    const why = r.locked ? "too many failed handshakes" : "too many handshakes being checked";
    return new AppError("RATE_LIMITED", `${why} from ${address}; try again in ${seconds} s`, { "Retry-After": String(seconds) });
  }
}
