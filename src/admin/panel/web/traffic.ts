/**
 * The system-wide daily series for the dashboard chart. The API gives days
 * per user and totals per user, so: ask which users had traffic in the
 * window, then each one's days, and add them up (a few users at a time).
 */
import { api, ApiError, type DayTraffic } from "./api.ts";
import { lastDays } from "../../../ui/format.ts";

const PARALLEL = 6;

export async function systemDays(days = 30): Promise<DayTraffic[]> {
  const active = await api.perUser(days);
  const sums = new Map(lastDays(days).map((date) => [date, { date, bytes_in: 0, bytes_out: 0, total: 0 }]));
  const queue = active.map((u) => u.user_id);
  const worker = async () => {
    for (let id = queue.shift(); id !== undefined; id = queue.shift()) {
      let series: DayTraffic[];
      try {
        series = await api.userDays(id, days);
      } catch (err) {
        if (err instanceof ApiError && err.status === 404) continue; // deleted meanwhile, and its traffic with it
        throw err;
      }
      for (const d of series) {
        let sum = sums.get(d.date);
        if (!sum) sums.set(d.date, (sum = { date: d.date, bytes_in: 0, bytes_out: 0, total: 0 }));
        sum.bytes_in += d.bytes_in;
        sum.bytes_out += d.bytes_out;
        sum.total += d.total;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(PARALLEL, queue.length) }, worker));
  // the server's "today" wins if the browser's clock is off by a day
  return [...sums.values()].sort((a, b) => a.date.localeCompare(b.date)).slice(-days);
}
