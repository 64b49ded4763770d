/**
 * The agents' endpoint's use of the handshake throttle (core/handshake-throttle.ts):
 * a HELLO from a locked address is refused with RATE_LIMITED before anything
 * in it is read; any other is reserved before its token is looked up, and
 * its result (a failure or not) is told to the ticket.
 *
 * Refusals cost no log line each: the first one from an address logs
 * `agent handshakes throttled address=... refused=1` at once, and from then
 * on that address gets at most one such line a minute, carrying how many
 * were refused since the last. A flood from one address is a line a minute.
 */
import type { AppError } from "../core/errors.ts";
import { HandshakeThrottle } from "../core/handshake-throttle.ts";
import { log } from "../log.ts";

const SUMMARY_EVERY_MS = 60_000;
/** How often pending counts are looked at, so the last minute of a flood is logged soon after it stops. */
const SWEEP_EVERY_MS = 10_000;
/** Addresses whose refusals are being summed; past this the oldest is dropped unlogged. */
const MAX_TALLIES = 10_000;

interface Tally {
  /** When the address's last line was written. */
  loggedAt: number;
  /** Refusals since then. */
  unlogged: number;
}

export class HandshakeGuard {
  private readonly throttle: HandshakeThrottle;
  private readonly tallies = new Map<string, Tally>();
  private sweeper?: ReturnType<typeof setInterval>;

  constructor(
    limit: number,
    private readonly now: () => number = Date.now,
  ) {
    this.throttle = new HandshakeThrottle(limit, now);
  }

  /**
   * A ticket for a HELLO from `address` once its turn comes (the connection
   * then ends it with its result), or the refusal to send instead of
   * reading it.
   */
  async reserve(address: string): ReturnType<HandshakeThrottle["reserve"]> {
    const r = await this.throttle.reserve(address);
    if (r.refusal) this.tally(address);
    return r;
  }

  private tally(address: string): void {
    const t = this.now();
    const e = this.tallies.get(address);
    if (!e) {
      log.info("agent handshakes throttled", { address, refused: 1 });
      this.tallies.set(address, { loggedAt: t, unlogged: 0 });
      if (this.tallies.size > MAX_TALLIES) this.tallies.delete(this.tallies.keys().next().value!);
      if (!this.sweeper) {
        this.sweeper = setInterval(() => this.sweep(), SWEEP_EVERY_MS);
        this.sweeper.unref(); // never what keeps the server running
      }
      return;
    }
    e.unlogged++;
    if (t - e.loggedAt >= SUMMARY_EVERY_MS) this.report(address, e, t);
  }

  /** Writes what is due; forgets addresses quiet for a minute (their next refusal logs at once again). */
  private sweep(): void {
    const t = this.now();
    for (const [address, e] of this.tallies) {
      if (t - e.loggedAt < SUMMARY_EVERY_MS) continue;
      if (e.unlogged > 0) this.report(address, e, t);
      else this.tallies.delete(address);
    }
    if (this.tallies.size === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private report(address: string, e: Tally, t: number): void {
    log.info("agent handshakes throttled", { address, refused: e.unlogged });
    e.loggedAt = t;
    e.unlogged = 0;
  }
}
