/**
 * The delivery worker, one per node: sends the outbox's deliveries
 * (core/events/outbox.ts), each webhook's one at a time, in order, at
 * least once.
 *
 * - A webhook is delivered by one node at a time: the node holds a lease
 *   on its row (the database's clock, 2 x --webhook-timeout + 5 s, renewed
 *   once a third of it has gone, before an attempt: one attempt takes at
 *   most --webhook-timeout, so it never runs out under a living node). A node killed or cut off stops renewing; once
 *   its lease has run out, another node's worker takes the webhook over
 *   and sends what is pending, starting with the delivery that may have
 *   been in flight (at least once: the receiver may see it twice, with the
 *   same webhook-id).
 * - A webhook's deliveries go out by id (the order their events were
 *   committed in): the next waits while the first is retried.
 * - A failed attempt (no 2xx in --webhook-timeout, a redirect, a refused
 *   address) is tried again after an exponential backoff with jitter, up
 *   to --webhook-backoff-max between two, until --webhook-retry-window
 *   after it was first due; then it is marked failed, and the next goes.
 *   A failed delivery can be sent again (POST .../retry).
 * - A webhook holding more than --webhook-max-pending deliveries has its
 *   oldest dropped (marked dropped, counted in the webhook's `dropped`),
 *   and the drop is an event, webhook.dropped, written with it: a receiver
 *   down for days costs bounded disk, and learns what it missed.
 *
 * The worker looks every POLL_MS, and at once when this node wrote
 * events (outbox.onWritten).
 */
import { and, asc, eq, inArray, min, sql } from "drizzle-orm";
import type { Clock } from "../core/clock.ts";
import { isoTimestamp, systemClock } from "../core/clock.ts";
import type { Outbox } from "../core/events/outbox.ts";
import { wants } from "../core/events/subscriptions.ts";
import { signedHeaders } from "../core/events/signing.ts";
import type { Store } from "../db/store.ts";
import { databaseUnavailable, reportUnavailable } from "../db/unavailable.ts";
import { log, quietWarnings } from "../log.ts";
import { DEFAULT_POST_LIMITS, postSigned, type PostLimits, type PostResult } from "./post.ts";
import { Buckets } from "../metrics/buckets.ts";

export interface WorkerLimits extends PostLimits {
  /** --webhook-concurrency: webhooks this node delivers to at once. */
  concurrency: number;
  /** --webhook-max-pending: deliveries one webhook may have waiting; past it the oldest are dropped. */
  maxPending: number;
  /** --webhook-backoff-max: the longest wait between two attempts. */
  backoffMaxMs: number;
}

export const DEFAULT_WORKER_LIMITS: WorkerLimits = { ...DEFAULT_POST_LIMITS, concurrency: 8, maxPending: 10_000, backoffMaxMs: 3_600_000 };

/** How often the worker looks for due deliveries when nothing told it. */
export const POLL_MS = 1_000;
/** How often the caps are enforced. */
const CAP_EVERY_MS = 5_000;
/** The first wait after a failure; it doubles with each. */
const BACKOFF_FIRST_MS = 2_000;
/** Deliveries one run sends before it gives its place to other webhooks (it is claimed again at the next look). */
const RUN_MAX = 200;
/** A delivery's last error keeps this many characters. */
const ERROR_CHARS = 300;

/** The wait before attempt `attempts + 1` (attempts: those made): half fixed, half random, doubling, capped. */
export function backoffMs(attempts: number, maxMs: number): number {
  const ceiling = Math.min(maxMs, BACKOFF_FIRST_MS * 2 ** Math.min(attempts - 1, 30));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

/** The database's clock in ms, as SQL: one clock for the leases of every node. */
const dbNowMs = (store: Store) =>
  store.dialect === "postgres" ? sql`(extract(epoch from clock_timestamp()) * 1000)::bigint` : sql`CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)`;

export interface WorkerStats {
  /** Deliveries answered with a 2xx. */
  delivered: number;
  /** Attempts that failed (each retry counts). */
  failedAttempts: number;
  /** Deliveries given up after the retry window. */
  failed: number;
  /** Deliveries dropped by the cap. */
  dropped: number;
  /** Seconds from an event to its delivery. */
  latency: Buckets;
  /** Seconds one attempt took, whatever its end. */
  attempt: Buckets;
  /** Deliveries waiting, over every webhook, at the last look at the caps (every few seconds). */
  pending: number;
}

export const LATENCY_BUCKETS_S = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600, 86_400];
export const ATTEMPT_BUCKETS_S = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

export class DeliveryWorker {
  private timer?: ReturnType<typeof setInterval>;
  private looking?: Promise<void>;
  private again = false;
  private stopped = false;
  private lastCap = 0;
  /** Webhooks this node is delivering to now. */
  private readonly running = new Map<number, Promise<void>>();
  private unlisten?: () => void;
  /** Where the worker's own event (webhook.dropped) is written. */
  private outbox?: Outbox;
  private readonly fault = quietWarnings(10_000, Date.now, "error");
  private readonly leaseMs: number;
  readonly stats: WorkerStats = { delivered: 0, failedAttempts: 0, failed: 0, dropped: 0, latency: new Buckets(LATENCY_BUCKETS_S), attempt: new Buckets(ATTEMPT_BUCKETS_S), pending: 0 };

  constructor(
    private readonly store: Store,
    private readonly nodeId: string,
    private readonly limits: WorkerLimits = DEFAULT_WORKER_LIMITS,
    private readonly clock: Clock = systemClock,
    /** How an attempt is made (tests give their own). */
    private readonly post: typeof postSigned = postSigned,
  ) {
    this.leaseMs = 2 * limits.timeoutMs + 5_000;
  }

  start(outbox?: Outbox): void {
    this.outbox = outbox;
    this.unlisten = outbox?.onWritten(() => this.wake());
    this.timer = setInterval(() => this.wake(), POLL_MS);
    this.timer.unref?.();
    this.wake();
  }

  /** Looks for due deliveries now (or right after the look under way). */
  wake(): void {
    if (this.stopped) return;
    if (this.looking) {
      this.again = true;
      return;
    }
    this.looking = this.look()
      .catch((err) => this.failed("webhook deliveries not looked at", err))
      .finally(() => {
        this.looking = undefined;
        if (this.again) {
          this.again = false;
          this.wake();
        }
      });
  }

  /** Stops looking; waits (bounded by the attempt's timeout) for the runs under way, then gives their leases back. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unlisten?.();
    await this.looking;
    await Promise.allSettled([...this.running.values()]);
  }

  private failed(what: string, err: unknown): void {
    if (databaseUnavailable(err)) reportUnavailable(what, err);
    else this.fault(what, what, { err: String(err) });
  }

  private async look(): Promise<void> {
    const { store } = this;
    const { webhookDeliveries: d, webhooks: w } = store.tables;
    if (Date.now() - this.lastCap >= CAP_EVERY_MS) {
      this.lastCap = Date.now();
      await this.enforceCap();
    }
    if (this.running.size >= this.limits.concurrency) return;
    // each webhook's first pending delivery, and whether it is due
    const heads = await store.all(store.db.select({ webhookId: d.webhookId, head: min(d.id) }).from(d).where(eq(d.status, "pending")).groupBy(d.webhookId));
    const waiting = heads.filter((h) => !this.running.has(h.webhookId) && h.head !== null);
    if (waiting.length === 0) return;
    const now = this.clock.now().getTime();
    const due = await store.all(
      store.db
        .select({ id: d.id, webhookId: d.webhookId })
        .from(d)
        .where(and(inArray(d.id, waiting.map((h) => h.head!)), sql`${d.nextAttemptMs} <= ${now}`)),
    );
    for (const { webhookId } of due) {
      if (this.stopped || this.running.size >= this.limits.concurrency) return;
      // the lease: free, run out, or this node's own already (its run ended, or it restarted under the same id)
      const claimed = await store.get(
        store.db
          .update(w)
          .set({ leaseNode: this.nodeId, leaseUntilMs: sql`${dbNowMs(store)} + ${this.leaseMs}` })
          .where(and(eq(w.id, webhookId), eq(w.enabled, true), sql`(${w.leaseUntilMs} < ${dbNowMs(store)} OR ${w.leaseNode} = ${this.nodeId})`))
          .returning({ id: w.id }),
      );
      if (!claimed) continue;
      const run = this.run(webhookId)
        .catch((err) => this.failed("webhook deliveries failed", err))
        .finally(() => {
          this.running.delete(webhookId);
          void this.release(webhookId);
          // its next delivery may be due at once, another webhook may wait for the place
          this.wake();
        });
      this.running.set(webhookId, run);
    }
  }

  private async release(webhookId: number): Promise<void> {
    const { webhooks: w } = this.store.tables;
    await this.store
      .run(this.store.db.update(w).set({ leaseNode: null, leaseUntilMs: 0 }).where(and(eq(w.id, webhookId), eq(w.leaseNode, this.nodeId))))
      .catch((err) => this.failed("webhook lease not given back", err));
  }

  /** Sends the webhook's due deliveries in order, while it holds the lease. */
  private async run(webhookId: number): Promise<void> {
    const { store } = this;
    const { webhookDeliveries: d, webhooks: w, events: e } = store.tables;
    // claimed just now (look()): renewed once a third of it has gone, always before it can run out
    let renewed = performance.now();
    for (let sent = 0; sent < RUN_MAX && !this.stopped; sent++) {
      // read with the webhook each time: a new URL, a rotation, a disabling or a lost lease counts from the next attempt
      const head = await store.get(
        store.db
          .select({
            id: d.id,
            attempts: d.attempts,
            nextAttemptMs: d.nextAttemptMs,
            giveUpMs: d.giveUpMs,
            uid: e.uid,
            type: e.type,
            at: e.at,
            data: e.data,
            url: w.url,
            secret: w.secret,
            previousSecret: w.previousSecret,
            previousUntil: w.previousUntil,
            enabled: w.enabled,
            leaseNode: w.leaseNode,
          })
          .from(d)
          .innerJoin(e, eq(e.id, d.eventId))
          .innerJoin(w, eq(w.id, d.webhookId))
          .where(and(eq(d.webhookId, webhookId), eq(d.status, "pending")))
          .orderBy(asc(d.id))
          .limit(1),
      );
      if (!head || (head.nextAttemptMs ?? 0) > this.clock.now().getTime()) return;
      if (!head.enabled || head.leaseNode !== this.nodeId) return; // disabled, or the lease went to another node
      if (performance.now() - renewed > this.leaseMs / 3) {
        const still = await store.get(
          store.db
            .update(w)
            .set({ leaseUntilMs: sql`${dbNowMs(store)} + ${this.leaseMs}` })
            .where(and(eq(w.id, webhookId), eq(w.leaseNode, this.nodeId)))
            .returning({ id: w.id }),
        );
        if (!still) return;
        renewed = performance.now();
      }
      const now = this.clock.now();
      const secrets = [head.secret];
      if (head.previousSecret && head.previousUntil && Date.parse(head.previousUntil) > now.getTime()) secrets.push(head.previousSecret);
      // the data is stored as JSON already: the body is written around it, not parsed and written again
      const body = `{"id":${JSON.stringify(head.uid)},"type":${JSON.stringify(head.type)},"timestamp":${JSON.stringify(head.at)},"data":${head.data}}`;
      const result = await this.post(head.url, body, signedHeaders(secrets, head.uid, Math.floor(now.getTime() / 1000), body), this.limits);
      const goOn = await this.record(head, result);
      if (!goOn) return;
    }
  }

  /** Writes how an attempt ended; whether the webhook's next delivery may go now. */
  private async record(head: { id: number; attempts: number; giveUpMs: number; at: string }, result: PostResult): Promise<boolean> {
    const { store } = this;
    const { webhookDeliveries: d } = store.tables;
    const now = this.clock.now();
    this.stats.attempt.observe(result.durationMs / 1000);
    const attempt = {
      attempts: head.attempts + 1,
      lastAttemptAt: isoTimestamp(now),
      responseStatus: result.status ?? null,
      durationMs: result.durationMs,
    };
    // written only while it is pending: dropped or delivered by another node meanwhile, it stays so
    const pending = and(eq(d.id, head.id), eq(d.status, "pending"));
    if (result.ok) {
      await store.run(store.db.update(d).set({ ...attempt, status: "delivered", error: null, nextAttemptMs: null, deliveredAt: isoTimestamp(now) }).where(pending));
      this.stats.delivered++;
      this.stats.latency.observe(Math.max(0, (now.getTime() - Date.parse(head.at)) / 1000));
      return true;
    }
    this.stats.failedAttempts++;
    const error = (result.error ?? "failed").slice(0, ERROR_CHARS);
    if (now.getTime() >= head.giveUpMs) {
      await store.run(store.db.update(d).set({ ...attempt, status: "failed", error, nextAttemptMs: null }).where(pending));
      this.stats.failed++;
      log.warn("webhook delivery failed for good", { delivery: head.id, attempts: attempt.attempts, error });
      return true;
    }
    const next = Math.min(now.getTime() + backoffMs(attempt.attempts, this.limits.backoffMaxMs), head.giveUpMs);
    await store.run(store.db.update(d).set({ ...attempt, error, nextAttemptMs: next }).where(pending));
    return false;
  }

  /**
   * Each webhook over --webhook-max-pending loses its oldest pending
   * deliveries, and the drop is said (webhook.dropped) in its transaction.
   * A webhook that gets that event itself keeps a place for it: otherwise
   * each look would drop one more event to make room for the last notice.
   */
  private async enforceCap(): Promise<void> {
    const { store } = this;
    const { webhookDeliveries: d, webhooks: w } = store.tables;
    const max = this.limits.maxPending;
    const counts = await store.all(store.db.select({ webhookId: d.webhookId, n: sql<number>`count(*)` }).from(d).where(eq(d.status, "pending")).groupBy(d.webhookId));
    this.stats.pending = counts.reduce((sum, c) => sum + Number(c.n), 0);
    for (const { webhookId, n } of counts.filter((c) => Number(c.n) > max)) {
      await store.transaction(async () => {
        const hook = await store.get(store.db.select({ userId: w.userId, events: w.events, enabled: w.enabled }).from(w).where(eq(w.id, webhookId)));
        if (!hook) return;
        const told = this.outbox !== undefined && hook.enabled && wants({ id: webhookId, userId: hook.userId, patterns: JSON.parse(hook.events) as string[] }, "webhook.dropped", hook.userId ?? undefined);
        const excess = Number(n) - max + (told ? 1 : 0);
        const oldest = store.db.select({ id: d.id }).from(d).where(and(eq(d.webhookId, webhookId), eq(d.status, "pending"))).orderBy(asc(d.id)).limit(excess);
        const gone = await store.all(
          store.db
            .update(d)
            .set({ status: "dropped", nextAttemptMs: null, error: `dropped unsent: the webhook had more than ${max} deliveries waiting` })
            .where(inArray(d.id, oldest))
            .returning({ id: d.id, at: d.createdAt }),
        );
        if (gone.length === 0) return;
        const total = await store.get(store.db.update(w).set({ dropped: sql`${w.dropped} + ${gone.length}` }).where(eq(w.id, webhookId)).returning({ dropped: w.dropped }));
        const times = gone.map((g) => g.at).sort();
        await this.outbox?.emit({
          type: "webhook.dropped",
          userId: hook.userId ?? undefined,
          data: { webhook_id: webhookId, user_id: hook.userId, dropped: gone.length, dropped_total: total?.dropped ?? gone.length, max_pending: max, from: times[0]!, to: times.at(-1)! },
        });
        this.stats.dropped += gone.length;
        log.warn("webhook deliveries dropped: too many waiting", { webhook: webhookId, dropped: gone.length, max });
      });
    }
  }
}
