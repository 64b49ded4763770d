/** Traffic periods, in UTC: the first day that counts toward a user's quota. */
import type { TrafficPeriod } from "../validate/fields.ts";
import { utcDate } from "./clock.ts";

export function periodStart(period: TrafficPeriod, now: Date): string {
  const y = now.getUTCFullYear();
  const m = now.getUTCMonth();
  switch (period) {
    case "daily":
      return utcDate(now);
    case "monthly":
      return utcDate(new Date(Date.UTC(y, m, 1)));
    case "quarterly":
      return utcDate(new Date(Date.UTC(y, m - (m % 3), 1)));
  }
}
