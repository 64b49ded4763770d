/**
 * Webhooks as records: made with a secret shown once, listed, changed,
 * deleted, their secret rotated with an overlap; their deliveries listed
 * and a finished one sent again. An admin's webhooks (`userId` null) and a
 * user's own (the portal's) are the same rows: `owner` narrows every call
 * to one user's, so another user's webhook is as unknown as one that does
 * not exist (404).
 */
import { and, count, desc, eq, inArray, isNull, lt, sql, type SQL } from "drizzle-orm";
import type { DeliveryRow, WebhookRow } from "../../db/schema.ts";
import type { Store } from "../../db/store.ts";
import { isoTimestamp, type Clock } from "../clock.ts";
import { AppError, badRequest, notFound } from "../errors.ts";
import { newWebhookSecret } from "./signing.ts";
import { refusedAtOnce, urlProblem } from "../../validate/webhook-url.ts";
import { patternProblem } from "./subscriptions.ts";

export const DELIVERY_STATUSES = ["pending", "delivered", "failed", "dropped"] as const;
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number];
export const WEBHOOK_ORIGINS = ["api", "portal", "flag"] as const;
export type WebhookOrigin = (typeof WEBHOOK_ORIGINS)[number];

export interface WebhookLimits {
  /** --webhooks-max: webhooks on the server at most (the users' own included). */
  maxWebhooks: number;
  /** --webhooks-per-user: a user's own at most. */
  perUser: number;
  /** --webhook-retry-window: a delivery sent again is tried this long. */
  retryWindowMs: number;
  /** --webhook-allow-private: a URL naming a loopback or private address is taken. */
  allowPrivate?: boolean;
}

export const DEFAULT_WEBHOOK_LIMITS: WebhookLimits = { maxWebhooks: 100, perUser: 5, retryWindowMs: 24 * 3_600_000 };

export interface NewWebhook {
  url: string;
  events: string[];
  description?: string;
  enabled?: boolean;
}

export type WebhookChanges = Partial<NewWebhook>;

/** A webhook as the lists show it: its row without secrets, with its pending deliveries. */
export type Webhook = Omit<WebhookRow, "secret" | "previousSecret"> & { pending: number };

/** A delivery with its event's type and id. */
export type Delivery = DeliveryRow & { eventUid: string; eventType: string; eventAt: string };

export interface DeliveryQuery {
  limit: number;
  /** Deliveries older than this one (smaller ids). */
  beforeId?: number;
  status?: DeliveryStatus;
}

/** Whose webhooks a call may reach: undefined, an admin's (any); a user id, that user's own only. */
export type Owner = number | undefined;

/** Days an event said once (its dedupe key) is kept, so that it is not said again: longer than a quarter, the longest quota period. */
export const DEDUPE_KEPT_DAYS = 100;

/** Maximum overlap of an old secret after a rotation: a week. */
export const MAX_OVERLAP_S = 7 * 86_400;

export type Webhooks = ReturnType<typeof createWebhooks>;

export function createWebhooks(store: Store, clock: Clock, limits: WebhookLimits = DEFAULT_WEBHOOK_LIMITS) {
  const { webhooks, webhookDeliveries, events } = store.tables;
  const now = () => isoTimestamp(clock.now());
  /** A URL and a list of events as a webhook may have them, or BAD_REQUEST saying why not. */
  function check(input: WebhookChanges, forUser: boolean): void {
    if (input.url !== undefined) {
      const problem = urlProblem(input.url) ?? refusedAtOnce(new URL(input.url), limits.allowPrivate ?? false);
      if (problem) throw badRequest(`url: ${problem}`);
    }
    if (input.events !== undefined) {
      if (input.events.length === 0) throw badRequest("events: name at least one event type or pattern (* for every one)");
      for (const p of input.events) {
        const problem = patternProblem(p, forUser);
        if (problem) throw badRequest(`events: ${problem}`);
      }
    }
  }

  const ownedBy = (owner: Owner): SQL | undefined => (owner === undefined ? undefined : eq(webhooks.userId, owner));

  async function row(id: number, owner: Owner): Promise<WebhookRow> {
    const found = await store.get(store.db.select().from(webhooks).where(and(eq(webhooks.id, id), ownedBy(owner))));
    if (!found) throw notFound("webhook");
    return found;
  }

  const pendingOf = async (ids: number[]) => {
    if (ids.length === 0) return new Map<number, number>();
    const rows = await store.all(
      store.db
        .select({ id: webhookDeliveries.webhookId, n: count() })
        .from(webhookDeliveries)
        .where(and(inArray(webhookDeliveries.webhookId, ids), eq(webhookDeliveries.status, "pending")))
        .groupBy(webhookDeliveries.webhookId),
    );
    return new Map(rows.map((r) => [r.id, r.n]));
  };

  const shown = (r: WebhookRow, pending: number): Webhook => {
    const { secret: _s, previousSecret: _p, ...rest } = r;
    return { ...rest, pending };
  };

  /** The --alert-webhook row made, or changed to what the flags say. */
  async function keep(url: string, events: string[], secret: string | undefined): Promise<void> {
    const at = now();
    const found = await store.get(store.db.select().from(webhooks).where(and(eq(webhooks.origin, "flag"), isNull(webhooks.userId))));
    if (!found) {
      await store.run(store.db.insert(webhooks).values({ url, events: JSON.stringify(events), description: "--alert-webhook", origin: "flag", secret: secret ?? newWebhookSecret(), createdAt: at, updatedAt: at }));
      return;
    }
    const set: Partial<WebhookRow> = { url, events: JSON.stringify(events), enabled: true };
    if (secret !== undefined && secret !== found.secret) Object.assign(set, { secret, previousSecret: null, previousUntil: null });
    if (found.url !== url || found.events !== JSON.stringify(events) || !found.enabled || set.secret !== undefined) {
      await store.run(store.db.update(webhooks).set({ ...set, updatedAt: at }).where(eq(webhooks.id, found.id)));
    }
  }

  return {
    /** Makes a webhook; `secret` is returned here and at a rotation only. */
    async create(input: NewWebhook, opts: { userId?: number; origin?: WebhookOrigin } = {}): Promise<{ webhook: Webhook; secret: string }> {
      check(input, opts.userId !== undefined);
      const secret = newWebhookSecret();
      const at = now();
      const made = await store.transaction(async () => {
        await store.lock("webhooks.count"); // two at once cannot both pass the caps
        const total = (await store.get(store.db.select({ n: count() }).from(webhooks)))?.n ?? 0;
        if (total >= limits.maxWebhooks) throw new AppError("TOO_MANY_WEBHOOKS", `the server has ${total} webhooks, its most (--webhooks-max ${limits.maxWebhooks})`);
        if (opts.userId !== undefined) {
          if (limits.perUser === 0) throw new AppError("TOO_MANY_WEBHOOKS", "this server lets users make no webhooks of their own: ask its admin");
          const own = (await store.get(store.db.select({ n: count() }).from(webhooks).where(eq(webhooks.userId, opts.userId))))?.n ?? 0;
          if (own >= limits.perUser) throw new AppError("TOO_MANY_WEBHOOKS", `you have ${own} webhooks, the most a user may have (${limits.perUser}): delete one first`);
        }
        return store.get(
          store.db
            .insert(webhooks)
            .values({
              url: input.url,
              events: JSON.stringify(input.events),
              description: input.description ?? "",
              enabled: input.enabled ?? true,
              userId: opts.userId ?? null,
              origin: opts.origin ?? (opts.userId === undefined ? "api" : "portal"),
              secret,
              createdAt: at,
              updatedAt: at,
            })
            .returning(),
        );
      });
      return { webhook: shown(made!, 0), secret };
    },

    /** An admin's list: every webhook (`owner` undefined), or a user's own. By id. */
    async list(owner: Owner): Promise<Webhook[]> {
      const rows = await store.all(store.db.select().from(webhooks).where(ownedBy(owner)).orderBy(webhooks.id));
      const pending = await pendingOf(rows.map((r) => r.id));
      return rows.map((r) => shown(r, pending.get(r.id) ?? 0));
    },

    async get(id: number, owner: Owner): Promise<Webhook> {
      const r = await row(id, owner);
      return shown(r, (await pendingOf([id])).get(id) ?? 0);
    },

    /** The row with its secrets, for whoever signs (the worker) or manages it (the --alert-webhook row). */
    row,

    async update(id: number, changes: WebhookChanges, owner: Owner): Promise<Webhook> {
      const r = await row(id, owner);
      check(changes, r.userId !== null);
      const set: Partial<WebhookRow> = { updatedAt: now() };
      if (changes.url !== undefined) set.url = changes.url;
      if (changes.events !== undefined) set.events = JSON.stringify(changes.events);
      if (changes.description !== undefined) set.description = changes.description;
      if (changes.enabled !== undefined) set.enabled = changes.enabled;
      await store.run(store.db.update(webhooks).set(set).where(eq(webhooks.id, id)));
      return this.get(id, owner);
    },

    /** Deletes the webhook with its deliveries (what was pending is never sent). */
    async remove(id: number, owner: Owner): Promise<WebhookRow> {
      const r = await row(id, owner);
      await store.run(store.db.delete(webhooks).where(eq(webhooks.id, id)));
      return r;
    },

    /**
     * A new secret; the old one keeps signing beside it for `overlapS`
     * seconds (0: not at all), so receivers can move to the new one
     * without missing a delivery.
     */
    async rotate(id: number, overlapS: number, owner: Owner): Promise<{ webhook: Webhook; secret: string }> {
      const r = await row(id, owner);
      const secret = newWebhookSecret();
      const until = overlapS > 0 ? isoTimestamp(new Date(clock.now().getTime() + overlapS * 1000)) : null;
      await store.run(
        store.db
          .update(webhooks)
          .set({ secret, previousSecret: until === null ? null : r.secret, previousUntil: until, updatedAt: now() })
          .where(eq(webhooks.id, id)),
      );
      return { webhook: await this.get(id, owner), secret };
    },

    /** A webhook's deliveries, newest first. */
    async deliveries(id: number, q: DeliveryQuery, owner: Owner): Promise<Delivery[]> {
      await row(id, owner);
      const where = [eq(webhookDeliveries.webhookId, id)];
      if (q.beforeId !== undefined) where.push(lt(webhookDeliveries.id, q.beforeId));
      if (q.status !== undefined) where.push(eq(webhookDeliveries.status, q.status));
      const rows = await store.all(
        store.db
          .select({ d: webhookDeliveries, uid: events.uid, type: events.type, at: events.at })
          .from(webhookDeliveries)
          .innerJoin(events, eq(events.id, webhookDeliveries.eventId))
          .where(and(...where))
          .orderBy(desc(webhookDeliveries.id))
          .limit(q.limit),
      );
      return rows.map((r) => ({ ...r.d, eventUid: r.uid, eventType: r.type, eventAt: r.at }));
    },

    /**
     * Sends a delivery again (failed, dropped, or delivered already): it is
     * pending once more, due now, and tried for another retry window. It
     * goes out after the webhook's deliveries waiting before it.
     */
    async retry(id: number, deliveryId: number, owner: Owner): Promise<Delivery> {
      await row(id, owner);
      const found = await store.get(store.db.select().from(webhookDeliveries).where(and(eq(webhookDeliveries.id, deliveryId), eq(webhookDeliveries.webhookId, id))));
      if (!found) throw notFound("delivery");
      if (found.status === "pending") throw new AppError("DELIVERY_PENDING", "this delivery is pending already: it is being tried");
      const due = clock.now().getTime();
      await store.run(
        store.db
          .update(webhookDeliveries)
          .set({ status: "pending", nextAttemptMs: due, giveUpMs: due + limits.retryWindowMs, error: null, deliveredAt: null })
          .where(eq(webhookDeliveries.id, deliveryId)),
      );
      const [d] = await this.deliveries(id, { limit: 1, beforeId: deliveryId + 1 }, owner);
      return d!;
    },

    /** Deliveries waiting, over every webhook (the metrics, the outbox alert). */
    async pendingTotal(): Promise<number> {
      return (await store.get(store.db.select({ n: count() }).from(webhookDeliveries).where(eq(webhookDeliveries.status, "pending"))))?.n ?? 0;
    },

    /** The row `--alert-webhook` keeps, if any. */
    flagRow: () => store.get(store.db.select().from(webhooks).where(and(eq(webhooks.origin, "flag"), isNull(webhooks.userId)))),

    /** Sets the --alert-webhook row's URL and secret as the flags say now (made when missing). */
    async keepFlagRow(url: string, events: string[], secret: string | undefined): Promise<void> {
      // one at a time over every node: two nodes starting together make one row
      await store.transaction(async () => {
        await store.lock("webhooks.flag");
        await keep(url, events, secret);
      });
    },

    /**
     * Deliveries that finished more than `days` days ago go, and the events
     * no delivery needs any more; an event said once (dedupe: a quota's
     * warning for its period) stays DEDUPE_KEPT_DAYS, so it is not said again.
     */
    async prune(days: number): Promise<number> {
      const before = (d: number) => isoTimestamp(new Date(clock.now().getTime() - d * 86_400_000));
      return store.transaction(async () => {
        const old = and(sql`${webhookDeliveries.status} <> 'pending'`, lt(webhookDeliveries.createdAt, before(days)));
        const n = (await store.get(store.db.select({ n: count() }).from(webhookDeliveries).where(old)))?.n ?? 0;
        if (n > 0) await store.run(store.db.delete(webhookDeliveries).where(old));
        const unneeded = sql`NOT EXISTS (SELECT 1 FROM ${webhookDeliveries} WHERE ${webhookDeliveries.eventId} = ${events.id})`;
        await store.run(store.db.delete(events).where(and(unneeded, sql`(${events.dedupe} IS NULL AND ${events.at} < ${before(days)} OR ${events.at} < ${before(Math.max(days, DEDUPE_KEPT_DAYS))})`)));
        return n;
      });
    },
  };
}
