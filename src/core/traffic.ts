/**
 * Traffic: bytes through each user's tunnels per UTC day. bytes_in flows from
 * the public to the local service, bytes_out back; a quota counts both.
 */
import { and, desc, asc, eq, gte, lte, sql, sum } from "drizzle-orm";
import type { UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { daysBefore, utcDate, type Clock } from "./clock.ts";
import { periodStart } from "./periods.ts";

export interface DayTraffic {
  userId: number;
  date: string;
  bytesIn: number;
  bytesOut: number;
  total: number;
}

export interface UserTraffic {
  userId: number;
  username: string;
  bytesIn: number;
  bytesOut: number;
  total: number;
}

export type Traffic = ReturnType<typeof createTraffic>;

export function createTraffic(store: Store, clock: Clock) {
  const { trafficDaily, users } = store.tables;
  const bytesIn = sql<number>`coalesce(${sum(trafficDaily.bytesIn)}, 0)`.mapWith(Number);
  const bytesOut = sql<number>`coalesce(${sum(trafficDaily.bytesOut)}, 0)`.mapWith(Number);
  const total = sql<number>`coalesce(sum(${trafficDaily.bytesIn} + ${trafficDaily.bytesOut}), 0)`.mapWith(Number);

  /** Per-user totals over [from, to], largest first, users without traffic left out. */
  function perUser(from: string, to: string, limit?: number): Promise<UserTraffic[]> {
    const q = store.db
      .select({ userId: users.id, username: users.username, bytesIn, bytesOut, total })
      .from(trafficDaily)
      .innerJoin(users, eq(trafficDaily.userId, users.id))
      .where(and(gte(trafficDaily.date, from), lte(trafficDaily.date, to)))
      .groupBy(users.id)
      .having(sql`sum(${trafficDaily.bytesIn} + ${trafficDaily.bytesOut}) > 0`)
      .orderBy(desc(total), asc(users.id));
    return store.all(limit === undefined ? q : q.limit(limit));
  }

  /** The window of `days` UTC days that ends today. */
  const window = (days: number) => {
    const now = clock.now();
    return { from: utcDate(daysBefore(now, days - 1)), to: utcDate(now) };
  };

  return {
    /** Adds bytes to a user's row for a day (upsert). */
    async add(userId: number, date: string, addIn: number, addOut: number): Promise<void> {
      await store.run(
        store.db
          .insert(trafficDaily)
          .values({ userId, date, bytesIn: addIn, bytesOut: addOut })
          .onConflictDoUpdate({
            target: [trafficDaily.userId, trafficDaily.date],
            set: {
              bytesIn: sql`${trafficDaily.bytesIn} + excluded.bytes_in`,
              bytesOut: sql`${trafficDaily.bytesOut} + excluded.bytes_out`,
            },
          }),
      );
    },

    /** Bytes (in + out) the user has used in the current period of their quota. */
    async usedInPeriod(user: Pick<UserRow, "id" | "trafficPeriod">): Promise<number> {
      const from = periodStart(user.trafficPeriod, clock.now());
      const row = await store.get(
        store.db
          .select({ total })
          .from(trafficDaily)
          .where(and(eq(trafficDaily.userId, user.id), gte(trafficDaily.date, from))),
      );
      return row?.total ?? 0;
    },

    /** One record per day of the window, oldest first, days without traffic as zeros. */
    async perDay(userId: number, days: number): Promise<DayTraffic[]> {
      const { from, to } = window(days);
      const rows = await store.all(
        store.db
          .select()
          .from(trafficDaily)
          .where(and(eq(trafficDaily.userId, userId), gte(trafficDaily.date, from), lte(trafficDaily.date, to))),
      );
      const byDate = new Map(rows.map((r) => [r.date, r]));
      const now = clock.now();
      const out: DayTraffic[] = [];
      for (let back = days - 1; back >= 0; back--) {
        const date = utcDate(daysBefore(now, back));
        const r = byDate.get(date);
        const i = r?.bytesIn ?? 0;
        const o = r?.bytesOut ?? 0;
        out.push({ userId, date, bytesIn: i, bytesOut: o, total: i + o });
      }
      return out;
    },

    perUser(days: number, limit?: number): Promise<UserTraffic[]> {
      const { from, to } = window(days);
      return perUser(from, to, limit);
    },

    /** All users' bytes (in + out) on the current UTC day. */
    async today(): Promise<number> {
      const row = await store.get(store.db.select({ total }).from(trafficDaily).where(eq(trafficDaily.date, utcDate(clock.now()))));
      return row?.total ?? 0;
    },
  };
}
