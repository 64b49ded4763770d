/**
 * What the edge sees happen, as events (core/events/): tunnels going live
 * and their agents leaving (with the bytes and the seconds), handshakes
 * refused, a user's traffic reaching 80 % and 100 % of their quota, a
 * traffic policy's rate limit refusing requests. All of it comes from hot
 * paths (a handshake, a visitor's request), so it goes through
 * `events.later()`: queued in memory, written within a fraction of a
 * second, never waited for. What a stranger can cause over and over (a
 * refused handshake, a rate limit) is sampled: at most REFUSALS_PER_MINUTE
 * refusals a minute are said, and a tunnel's rate limit once a minute with
 * the count of the minute before. A stop (stop()) says what would
 * otherwise wait: the rate limits counted since their last event, and the
 * refusals whose token is being looked up; the outbox's own stop writes
 * the queue after it.
 */
import type { AppError } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import { deviceFields } from "../core/device-ids.ts";
import { periodStart } from "../core/periods.ts";
import type { UserRow } from "../db/schema.ts";
import type { Registry, Tunnel } from "./registry.ts";

/** Refused handshakes said a minute at most, by this node (the rest are in the audit log's counts). */
export const REFUSALS_PER_MINUTE = 60;
/** The share of a quota past which quota.warning is said. */
export const QUOTA_WARNING = 0.8;
const MINUTE_MS = 60_000;
/** Quota keys remembered as said, at most (the database's dedupe says the rest once anyway). */
const SAID_KEPT = 10_000;

export class EdgeEvents {
  private refusals = { minute: 0, n: 0 };
  /** Rate limits counted per tunnel since its last event, with how to say them. */
  private readonly limited = new Map<Tunnel, { n: number; say(): void; timer?: ReturnType<typeof setTimeout> }>();
  /** Refusals waiting for their token's owner to be looked up. */
  private readonly identifying = new Set<Promise<void>>();
  /** Quota events said by this process (dedupe keys): each is asked of the database once. */
  private readonly said = new Set<string>();

  constructor(
    private readonly core: Core,
    /** This node's name in events (--node-id; "local" on one node). */
    private readonly node: string,
    /** Where a tunnel is reached, as READY told its agent. */
    private readonly addressOf: (t: Tunnel) => string,
  ) {}

  /** tunnel.online and tunnel.offline from the registry's hooks. */
  attach(registry: Registry): void {
    registry.life = {
      online: (t) => {
        t.rateLimited ??= () => this.rateLimited(t);
        this.core.events.later({ type: "tunnel.online", userId: t.userId, data: this.tunnelData(t) });
      },
      offline: (t) =>
        this.core.events.later({
          type: "tunnel.offline",
          userId: t.userId,
          data: { ...this.tunnelData(t), bytes_in: t.bytesIn, bytes_out: t.bytesOut, duration_s: Math.max(0, Math.round((Date.now() - t.connectedAt.getTime()) / 1000)) },
        }),
    };
  }

  private tunnelData(t: Tunnel) {
    return { user_id: t.userId, username: t.username, ...deviceFields(t.tokenId), tunnel_id: t.id, kind: t.protocol, address: this.addressOf(t), node: this.node };
  }

  /**
   * A handshake refused by the rules, or a tunnel a live session added
   * (wire.ts ADD): who it was when the token is known (a HELLO's looked up
   * only for those said; a live session's known already).
   */
  refused(err: AppError, address: string, token: string | { user: Pick<UserRow, "id" | "username">; token: { id: number } } | undefined): void {
    const minute = Math.floor(Date.now() / MINUTE_MS);
    if (this.refusals.minute !== minute) this.refusals = { minute, n: 0 };
    if (++this.refusals.n > REFUSALS_PER_MINUTE) return;
    const say = (who?: { user: Pick<UserRow, "id" | "username">; token: { id: number } }) =>
      this.core.events.later({
        type: "tunnel.refused",
        userId: who?.user.id,
        data: { code: err.code, message: err.message, user_id: who?.user.id ?? null, username: who?.user.username ?? null, ...deviceFields(who?.token.id), address, node: this.node },
      });
    if (token === undefined) return say();
    if (typeof token !== "string") return say(token);
    const looked = this.core.tokens.identify(token).then(say, () => say());
    this.identifying.add(looked);
    void looked.finally(() => this.identifying.delete(looked));
  }

  /**
   * A user's traffic against their quota, as the quota's check found it
   * (every second, for the users with live tunnels): quota.warning past
   * 80 %, quota.exceeded at 100 %, each once a period over every node
   * (its dedupe key names the user and the period's start).
   */
  quota(user: UserRow, used: number): void {
    if (user.trafficLimit <= 0 || used < user.trafficLimit * QUOTA_WARNING) return;
    // a quota filled within one check says its warning first, then that it is used up
    this.quotaEvent("quota.warning", user, used);
    if (used >= user.trafficLimit) this.quotaEvent("quota.exceeded", user, used);
  }

  private quotaEvent(type: "quota.warning" | "quota.exceeded", user: UserRow, used: number): void {
    const key = `${type}:${user.id}:${periodStart(user.trafficPeriod, this.core.clock.now())}`;
    if (this.said.has(key)) return;
    if (this.said.size >= SAID_KEPT) this.said.clear();
    this.said.add(key);
    const percent = Math.min(100, Math.floor((used / user.trafficLimit) * 100));
    this.core.events.later({ type, userId: user.id, dedupe: key, data: { user_id: user.id, username: user.username, used, limit: user.trafficLimit, period: user.trafficPeriod, percent } });
  }

  /** A request refused by a policy's rate limit: said at once for the first of a quiet tunnel, then once a minute with the count. */
  rateLimited(t: Tunnel): void {
    const seen = this.limited.get(t);
    if (seen) return void seen.n++;
    const entry: { n: number; say(): void; timer?: ReturnType<typeof setTimeout> } = {
      n: 1,
      say: () => this.core.events.later({ type: "policy.rate_limited", userId: t.userId, data: { user_id: t.userId, username: t.username, address: this.addressOf(t), refused: entry.n, node: this.node } }),
    };
    this.limited.set(t, entry);
    entry.say();
    // the rest of the minute is one more event, if any came
    entry.n = 0;
    entry.timer = setTimeout(() => {
      this.limited.delete(t);
      if (entry.n > 0) entry.say();
    }, MINUTE_MS);
    entry.timer.unref?.();
  }

  /**
   * At a stop: the rate limits counted since their last event are said now
   * rather than at the end of their minute, and the refusals being looked
   * up are waited for (a lookup is one query), so that the outbox's stop
   * writes them all.
   */
  async stop(): Promise<void> {
    for (const entry of this.limited.values()) {
      clearTimeout(entry.timer);
      if (entry.n > 0) entry.say();
    }
    this.limited.clear();
    await Promise.allSettled([...this.identifying]);
  }
}
