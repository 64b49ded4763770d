/**
 * The outbox: an event becomes rows in the database, one in `events` and
 * one in `webhook_deliveries` per webhook that wants it, and the delivery
 * worker (webhooks/worker.ts) sends them from there. Nothing is sent that
 * was not written first, and nothing written is lost: a server killed
 * between the write and the delivery sends it after its restart, another
 * node sends it when this one is gone.
 *
 * `emit()` writes in the caller's transaction when there is one: an admin's
 * change and its event are committed together or not at all. `later()` is
 * for what the edge sees happen on its hot paths (a tunnel online or
 * offline, a refused handshake, a rate limit): it only queues, and the queue
 * is written every QUEUE_FLUSH_MS in one transaction, so an agent's
 * handshake or a visitor's request never waits on the database for an
 * event. The queue is bounded (--events-queue): past it the oldest queued
 * event is dropped and counted (burrow_events_queue_dropped_total).
 *
 * Events are written in one order over every node: each write holds the
 * lock "events" (PostgreSQL: an advisory lock for the transaction; SQLite:
 * one writer anyway), so ids grow in commit order and a webhook's
 * deliveries, sent by id, go out in the order their changes committed.
 */
import { eq } from "drizzle-orm";
import type { Store } from "../../db/store.ts";
import { databaseUnavailable, reportUnavailable } from "../../db/unavailable.ts";
import { log, quietWarnings } from "../../log.ts";
import { isoTimestamp, type Clock } from "../clock.ts";
import { randomBase62 } from "../secrets.ts";
import type { EventData, EventType } from "./catalogue.ts";
import { wants, type Subscriber } from "./subscriptions.ts";

/** One event as its source gives it. */
export interface EventInput<T extends EventType = EventType> {
  type: T;
  data: EventData<T>;
  /** The user it concerns (their own webhooks get it when its type is about users). */
  userId?: number;
  /** Set for an event that must be said once: a second with the same key is not written (a quota's warning for a period). */
  dedupe?: string;
}

export interface OutboxSettings {
  /** --webhook-retry-window: how long a delivery is tried before it is marked failed. */
  retryWindowMs: number;
  /** --events-queue: events later() holds at most while they wait to be written. */
  queueMax: number;
}

export const DEFAULT_OUTBOX_SETTINGS: OutboxSettings = { retryWindowMs: 24 * 3_600_000, queueMax: 10_000 };

/** How often later()'s queue is written. */
export const QUEUE_FLUSH_MS = 200;
/** Events one transaction of the queue writes at most (an event's row has 6 parameters: well within a statement's bound). */
const BATCH = 500;
/** Delivery rows one statement inserts at most (5 parameters each). */
const DELIVERY_ROWS = 1000;
/** The lock every write of events holds (store.lock). */
const EVENTS_LOCK = "events";

export type Outbox = ReturnType<typeof createOutbox>;
/** What a rule that changes something calls to say so (outbox.emit); a no-op where no outbox is given. */
export type Emit = <T extends EventType>(input: EventInput<T>) => Promise<void>;
export const emitNothing: Emit = async () => {};

export function createOutbox(store: Store, clock: Clock, settings: OutboxSettings = DEFAULT_OUTBOX_SETTINGS) {
  const { events, webhookDeliveries, webhooks } = store.tables;
  let queue: { input: EventInput; at: Date }[] = [];
  let timer: ReturnType<typeof setTimeout> | undefined;
  let flushing: Promise<void> | undefined;
  const fault = quietWarnings(10_000, Date.now, "error");
  const stats = { written: 0, queueDropped: 0, writeFailures: 0 };
  /** Told after a write of the queue, and (a moment later, after its transaction commits) of an emit: the worker looks at once. */
  const listeners = new Set<() => void>();
  const written = () => {
    for (const l of listeners) l();
  };

  /** Writes events in the current transaction (or one of their own); returns how many some webhook wanted. */
  async function write(items: { input: EventInput; at: Date }[]): Promise<number> {
    return store.transaction(async () => {
      await store.lock(EVENTS_LOCK);
      const hooks = await store.all(store.db.select({ id: webhooks.id, events: webhooks.events, userId: webhooks.userId }).from(webhooks).where(eq(webhooks.enabled, true)));
      if (hooks.length === 0) return 0;
      const subscribers: Subscriber[] = hooks.map((r) => ({ id: r.id, userId: r.userId, patterns: JSON.parse(r.events) as string[] }));
      // one insert for the batch's events and one for their deliveries: an event said already (dedupe) comes back without its row
      const wanted = items.flatMap(({ input, at }) => {
        const wanting = subscribers.filter((s) => wants(s, input.type, input.userId));
        return wanting.length === 0 ? [] : [{ uid: `evt_${randomBase62(24)}`, input, at, wanting }];
      });
      if (wanted.length === 0) return 0;
      const rows = await store.all(
        store.db
          .insert(events)
          .values(wanted.map(({ uid, input, at }) => ({ uid, type: input.type, at: isoTimestamp(at), userId: input.userId ?? null, data: JSON.stringify(input.data), dedupe: input.dedupe ?? null })))
          .onConflictDoNothing({ target: events.dedupe })
          .returning({ id: events.id, uid: events.uid }),
      );
      const ids = new Map(rows.map((r) => [r.uid, r.id]));
      const due = clock.now().getTime();
      const deliveries = wanted.flatMap(({ uid, at, wanting }) => {
        const eventId = ids.get(uid);
        return eventId === undefined ? [] : wanting.map((s) => ({ webhookId: s.id, eventId, createdAt: isoTimestamp(at), nextAttemptMs: due, giveUpMs: due + settings.retryWindowMs }));
      });
      // in slices: a statement's parameters are bounded (SQLite's 32,766)
      for (let i = 0; i < deliveries.length; i += DELIVERY_ROWS) await store.run(store.db.insert(webhookDeliveries).values(deliveries.slice(i, i + DELIVERY_ROWS)));
      const n = rows.length;
      return n;
    });
  }

  async function flush(): Promise<void> {
    while (flushing) await flushing;
    if (queue.length === 0) return;
    // taken out while written: what later() adds meanwhile queues behind it
    const batch = queue.slice(0, BATCH);
    queue = queue.slice(batch.length);
    flushing = (async () => {
      try {
        stats.written += await write(batch);
        written();
      } catch (err) {
        if (databaseUnavailable(err)) {
          // the database cannot take them now: back at the front, within the bound, for the next round
          queue = batch.concat(queue);
          if (queue.length > settings.queueMax) {
            stats.queueDropped += queue.length - settings.queueMax;
            queue = queue.slice(queue.length - settings.queueMax);
          }
          return reportUnavailable("events not written yet", err);
        }
        // anything else would fail again: they are dropped, counted and said
        stats.writeFailures += batch.length;
        fault("events", "events not written", { events: batch.length, err: String(err) });
      }
    })();
    try {
      await flushing;
    } finally {
      flushing = undefined;
    }
    // a burst bigger than a batch is written batch after batch; a few stragglers wait for the next round
    if (queue.length >= BATCH) await flush();
    else if (queue.length > 0) schedule();
  }

  function schedule(): void {
    if (timer) return;
    timer = setTimeout(() => {
      timer = undefined;
      void flush();
    }, QUEUE_FLUSH_MS);
    timer.unref?.();
  }

  return {
    /**
     * Writes the event now, in the caller's transaction when there is one
     * (it commits or rolls back with the change that caused it). Rejects as
     * the write does: a change whose event cannot be written is not made.
     */
    async emit<T extends EventType>(input: EventInput<T>): Promise<void> {
      const n = await write([{ input, at: clock.now() }]);
      stats.written += n;
      // the caller's transaction commits after this returns: the worker looks a moment later
      if (n > 0) setTimeout(written, 20).unref?.();
    },

    /** Queues the event to be written within QUEUE_FLUSH_MS, never waiting and never throwing (the hot paths' way). */
    later<T extends EventType>(input: EventInput<T>): void {
      if (queue.length >= settings.queueMax) {
        queue.shift();
        stats.queueDropped++;
        fault("queue", "events queue full: the oldest queued event was dropped", { max: settings.queueMax });
      }
      queue.push({ input, at: clock.now() });
      schedule();
    },

    /** Writes what is queued now (a stop, tests). */
    flush,

    /** Told when events may have been written (the worker's cue). */
    onWritten(listener: () => void): () => void {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },

    /** Events written, queued ones dropped when the queue was full, and those lost to a write that failed, since start. */
    get stats(): Readonly<typeof stats> & { queued: number } {
      return { ...stats, queued: queue.length };
    },

    /** Writes what is queued, then stops the timer. */
    async stop(): Promise<void> {
      clearTimeout(timer);
      timer = undefined;
      await flush().catch((err) => log.warn("events not written at stop", { err: String(err) }));
    },
  };
}
