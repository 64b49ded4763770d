/**
 * Dashboard, active tunnels, traffic analytics and a user's traffic_used,
 * against a real server. Traffic is written straight into the server's
 * SQLite database (WAL mode: a second connection may write while it runs),
 * on dates computed from today in UTC, so every assertion holds on any day.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
}, 30_000);
afterAll(() => server?.stop());

// ---- dates, in UTC ----

const DAY_MS = 24 * 3600 * 1000;
const ymd = (d: Date) => d.toISOString().slice(0, 10);
const utcDay = (y: number, m: number, d: number) => ymd(new Date(Date.UTC(y, m, d)));
/** The UTC date `back` days before today. */
function daysAgo(back: number): string {
  const now = new Date();
  return utcDay(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - back);
}
const today = () => daysAgo(0);
/** Adds `n` days to a YYYY-MM-DD date. */
const plusDays = (date: string, n: number) => ymd(new Date(Date.parse(date + "T00:00:00Z") + n * DAY_MS));

// ---- traffic rows ----

interface Row {
  user_id: number;
  date: string;
  bytes_in: number;
  bytes_out: number;
}

/** Writes rows into traffic_daily through a second connection to the server's database. */
function insertTraffic(target: TestServer, rows: Row[]): void {
  const db = new Database(join(target.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const insert = db.prepare("INSERT INTO traffic_daily (user_id, date, bytes_in, bytes_out) VALUES (?, ?, ?, ?)");
    db.transaction(() => {
      for (const r of rows) insert.run(r.user_id, r.date, r.bytes_in, r.bytes_out);
    })();
  } finally {
    db.close();
  }
}

function expectError(res: { status: number; body: unknown }, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: expect.any(String) });
  if (mentions) expect((res.body as { error: string }).error).toContain(mentions);
}

const DAY_RECORD_FIELDS = ["bytes_in", "bytes_out", "date", "total", "user_id"];
const USER_RECORD_FIELDS = ["bytes_in", "bytes_out", "total", "user_id", "username"];

describe("active tunnels", () => {
  test("are an empty list while no tunnel is connected", async () => {
    const userId = await api.createUser("tunnel-less");
    await api.post(`/api/users/${userId}/tokens`, { device_name: "laptop" });
    const res = await api.get("/api/tunnels/active");
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });

  test("count as 0 on the dashboard while no tunnel is connected", async () => {
    const res = await api.get("/api/dashboard");
    expect(res.status).toBe(200);
    expect(res.body.active_tunnels).toBe(0);
  });
});

describe("traffic analytics for one user", () => {
  let userId: number;
  const rows = () => [
    { user_id: userId, date: today(), bytes_in: 1, bytes_out: 2 },
    { user_id: userId, date: daysAgo(2), bytes_in: 10, bytes_out: 20 },
    { user_id: userId, date: daysAgo(6), bytes_in: 100, bytes_out: 200 },
    { user_id: userId, date: daysAgo(7), bytes_in: 1000, bytes_out: 2000 },
    { user_id: userId, date: daysAgo(40), bytes_in: 10_000, bytes_out: 20_000 },
    { user_id: userId, date: daysAgo(364), bytes_in: 100_000, bytes_out: 200_000 },
    { user_id: userId, date: daysAgo(365), bytes_in: 1_000_000, bytes_out: 2_000_000 },
  ];

  beforeAll(async () => {
    userId = await api.createUser("analytics-one");
    const other = await api.createUser("analytics-other");
    insertTraffic(server, rows());
    // another user's traffic on the same days must not leak in
    insertTraffic(server, [
      { user_id: other, date: today(), bytes_in: 5_000_000, bytes_out: 5_000_000 },
      { user_id: other, date: daysAgo(2), bytes_in: 5_000_000, bytes_out: 5_000_000 },
    ]);
  }, 30_000);

  /** What the API must answer for `days`, from the rows above. */
  function expected(days: number) {
    const byDate = new Map(rows().map((r) => [r.date, r]));
    const out = [];
    for (let back = days - 1; back >= 0; back--) {
      const date = daysAgo(back);
      const r = byDate.get(date);
      const i = r?.bytes_in ?? 0;
      const o = r?.bytes_out ?? 0;
      out.push({ user_id: userId, date, bytes_in: i, bytes_out: o, total: i + o });
    }
    return out;
  }

  test("gives exactly N daily records, oldest first, zero-filled, ending today", async () => {
    const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=7`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(7);
    expect(res.body).toEqual(expected(7));
    expect(res.body[0].date).toBe(daysAgo(6));
    expect(res.body[6].date).toBe(today());
    // the row 7 days ago is outside a 7-day window
    expect(res.body.map((r: { total: number }) => r.total)).toEqual([300, 0, 0, 0, 30, 0, 3]);
  });

  test("gives records of exactly user_id, date, bytes_in, bytes_out and total, on consecutive days", async () => {
    const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=10`);
    for (const r of res.body) {
      expect(Object.keys(r).sort()).toEqual(DAY_RECORD_FIELDS);
      expect(r.date).toMatch(/^\d{4}-\d{2}-\d{2}$/);
      expect(r.total).toBe(r.bytes_in + r.bytes_out);
    }
    for (let i = 1; i < res.body.length; i++) expect(res.body[i].date).toBe(plusDays(res.body[i - 1].date, 1));
  });

  test("covers 30 days when days is not given", async () => {
    const res = await api.get(`/api/analytics/traffic?user_id=${userId}`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(30);
    expect(res.body).toEqual(expected(30));
    expect(res.body[0].date).toBe(daysAgo(29));
  });

  test("gives only today for days=1", async () => {
    const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=1`);
    expect(res.body).toEqual([{ user_id: userId, date: today(), bytes_in: 1, bytes_out: 2, total: 3 }]);
  });

  test("reaches back a whole year for days=365 and no further", async () => {
    const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=365`);
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(365);
    expect(res.body).toEqual(expected(365));
    expect(res.body[0]).toEqual({ user_id: userId, date: daysAgo(364), bytes_in: 100_000, bytes_out: 200_000, total: 300_000 });
  });

  test("gives zeros for every day to a user without traffic", async () => {
    const quiet = await api.createUser("analytics-quiet");
    const res = await api.get(`/api/analytics/traffic?user_id=${quiet}&days=5`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual(
      [4, 3, 2, 1, 0].map((back) => ({ user_id: quiet, date: daysAgo(back), bytes_in: 0, bytes_out: 0, total: 0 })),
    );
  });

  test("answers 404 for a user that does not exist", async () => {
    expectError(await api.get("/api/analytics/traffic?user_id=999999"), 404);
    expectError(await api.get("/api/analytics/traffic?user_id=999999&days=7"), 404);
  });

  test("answers 400 naming user_id when it is not a positive integer", async () => {
    for (const raw of ["abc", "1.5", "-1", "", "1e2", "99999999999999999999"]) {
      const res = await api.get(`/api/analytics/traffic?user_id=${encodeURIComponent(raw)}`);
      expect({ raw, status: res.status }).toEqual({ raw, status: 400 });
      expectError(res, 400, "user_id");
    }
  });
});

describe("the days parameter", () => {
  test("must be an integer from 1 to 365, with or without user_id, else 400 naming days", async () => {
    const userId = await api.createUser("days-check");
    for (const raw of ["0", "366", "-1", "abc", "1.5", "", "1000", " 7", "7days"]) {
      for (const prefix of ["", `user_id=${userId}&`]) {
        const res = await api.get(`/api/analytics/traffic?${prefix}days=${encodeURIComponent(raw)}`);
        expect({ raw, prefix, status: res.status }).toEqual({ raw, prefix, status: 400 });
        expectError(res, 400, "days");
      }
    }
  });

  test("accepts the bounds 1 and 365", async () => {
    const userId = await api.createUser("days-bounds");
    for (const days of [1, 365]) {
      expect((await api.get(`/api/analytics/traffic?days=${days}`)).status).toBe(200);
      const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=${days}`);
      expect(res.status).toBe(200);
      expect(res.body).toHaveLength(days);
    }
  });
});

describe("system-wide traffic analytics", () => {
  test("give one record per user with traffic in the window, largest total first", async () => {
    await using s = await startServer();
    const c = await signedIn(s);
    expect((await c.get("/api/analytics/traffic")).body).toEqual([]);

    const small = await c.createUser("small");
    const big = await c.createUser("big");
    const middle = await c.createUser("middle");
    const old = await c.createUser("old-only");
    const edge = await c.createUser("edge");
    await c.createUser("silent");
    insertTraffic(s, [
      { user_id: small, date: today(), bytes_in: 5, bytes_out: 5 },
      { user_id: big, date: today(), bytes_in: 400, bytes_out: 100 },
      { user_id: big, date: daysAgo(3), bytes_in: 1000, bytes_out: 0 },
      { user_id: big, date: daysAgo(29), bytes_in: 50, bytes_out: 50 },
      { user_id: middle, date: daysAgo(1), bytes_in: 20, bytes_out: 80 },
      { user_id: middle, date: daysAgo(6), bytes_in: 0, bytes_out: 100 },
      { user_id: old, date: daysAgo(40), bytes_in: 1_000_000, bytes_out: 1_000_000 },
      { user_id: edge, date: daysAgo(7), bytes_in: 70, bytes_out: 0 },
    ]);

    const month = await c.get("/api/analytics/traffic");
    expect(month.status).toBe(200);
    expect(month.body).toEqual([
      { user_id: big, username: "big", bytes_in: 1450, bytes_out: 150, total: 1600 },
      { user_id: middle, username: "middle", bytes_in: 20, bytes_out: 180, total: 200 },
      { user_id: edge, username: "edge", bytes_in: 70, bytes_out: 0, total: 70 },
      { user_id: small, username: "small", bytes_in: 5, bytes_out: 5, total: 10 },
    ]);
    for (const r of month.body) expect(Object.keys(r).sort()).toEqual(USER_RECORD_FIELDS);

    // a 7-day window holds today and 6 days back: edge's row 7 days ago drops out
    const week = await c.get("/api/analytics/traffic?days=7");
    expect(week.body).toEqual([
      { user_id: big, username: "big", bytes_in: 1400, bytes_out: 100, total: 1500 },
      { user_id: middle, username: "middle", bytes_in: 20, bytes_out: 180, total: 200 },
      { user_id: small, username: "small", bytes_in: 5, bytes_out: 5, total: 10 },
    ]);

    const day = await c.get("/api/analytics/traffic?days=1");
    expect(day.body).toEqual([
      { user_id: big, username: "big", bytes_in: 400, bytes_out: 100, total: 500 },
      { user_id: small, username: "small", bytes_in: 5, bytes_out: 5, total: 10 },
    ]);

    const year = await c.get("/api/analytics/traffic?days=365");
    expect(year.body.map((r: { username: string }) => r.username)).toEqual(["old-only", "big", "middle", "edge", "small"]);
  }, 30_000);
});

describe("the dashboard", () => {
  test("of a fresh server shows one user and nothing else", async () => {
    await using s = await startServer();
    const c = await signedIn(s);
    const res = await c.get("/api/dashboard");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ total_users: 1, active_tunnels: 0, traffic_today: 0, top_users: [] });
  }, 30_000);

  test("counts users, sums today's traffic and ranks at most 10 top users over the last 30 days", async () => {
    await using s = await startServer();
    const c = await signedIn(s);
    const ids: number[] = [];
    for (let i = 1; i <= 12; i++) ids.push(await c.createUser(`top-${String(i).padStart(2, "0")}`));
    const quiet = await c.createUser("quiet");

    // recent totals in an order unrelated to the ids
    const recent = [7, 3, 11, 1, 9, 12, 5, 2, 10, 4, 8, 6].map((k) => k * 1000);
    const rows: Row[] = ids.map((id, i) => ({ user_id: id, date: today(), bytes_in: recent[i]! / 2, bytes_out: recent[i]! / 2 }));
    // top-04 had a huge month 31 days ago: it does not count
    rows.push({ user_id: ids[3]!, date: daysAgo(31), bytes_in: 900_000, bytes_out: 900_000 });
    // top-02's row 29 days ago counts and lifts it to first place
    rows.push({ user_id: ids[1]!, date: daysAgo(29), bytes_in: 50_000, bytes_out: 0 });
    // yesterday counts toward the 30 days but not toward today
    rows.push({ user_id: ids[7]!, date: daysAgo(1), bytes_in: 0, bytes_out: 30_000 });
    insertTraffic(s, rows);

    const totals = new Map<number, { in: number; out: number }>();
    for (const r of rows) {
      if (r.date < daysAgo(29)) continue;
      const t = totals.get(r.user_id) ?? { in: 0, out: 0 };
      totals.set(r.user_id, { in: t.in + r.bytes_in, out: t.out + r.bytes_out });
    }
    const ranked = [...totals.entries()]
      .map(([id, t]) => ({
        user_id: id,
        username: `top-${String(ids.indexOf(id) + 1).padStart(2, "0")}`,
        bytes_in: t.in,
        bytes_out: t.out,
        total: t.in + t.out,
      }))
      .sort((a, b) => b.total - a.total);

    const res = await c.get("/api/dashboard");
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["active_tunnels", "top_users", "total_users", "traffic_today"]);
    expect(res.body.total_users).toBe(14);
    expect(res.body.active_tunnels).toBe(0);
    expect(res.body.traffic_today).toBe(recent.reduce((a, b) => a + b, 0));
    expect(res.body.top_users).toHaveLength(10);
    expect(res.body.top_users).toEqual(ranked.slice(0, 10));
    for (const u of res.body.top_users) expect(Object.keys(u).sort()).toEqual(USER_RECORD_FIELDS);
    // spelled out, so the ranking above cannot hide a mistake of its own
    expect(res.body.top_users[0]).toMatchObject({ username: "top-02", total: 53_000 });
    expect(res.body.top_users[1]).toMatchObject({ username: "top-08", total: 32_000 });
    const names = res.body.top_users.map((u: { username: string }) => u.username);
    expect(names).not.toContain("top-04"); // 1000 recent bytes: last of the twelve, old bytes ignored
    expect(names).not.toContain("quiet");
    const listed = res.body.top_users.map((u: { total: number }) => u.total);
    expect(listed).toEqual([...listed].sort((a: number, b: number) => b - a));
  }, 30_000);

  test("counts a user's bytes in and out for today, and nobody's from yesterday", async () => {
    await using s = await startServer();
    const c = await signedIn(s);
    const a = await c.createUser("today-a");
    const b = await c.createUser("today-b");
    insertTraffic(s, [
      { user_id: a, date: today(), bytes_in: 123, bytes_out: 456 },
      { user_id: b, date: today(), bytes_in: 1000, bytes_out: 0 },
      { user_id: b, date: daysAgo(1), bytes_in: 99_999, bytes_out: 99_999 },
      { user_id: 1, date: today(), bytes_in: 0, bytes_out: 1 },
    ]);
    const res = await c.get("/api/dashboard");
    expect(res.body.traffic_today).toBe(123 + 456 + 1000 + 1);
    expect(res.body.total_users).toBe(3);
  }, 30_000);
});

describe("traffic_used in a user's details", () => {
  /**
   * Rows on the dates that matter for every period: today, yesterday, the
   * first of this month and the day before it, the first of this quarter and
   * the day before it, and long ago. Some of these are the same day on some
   * days of the year (today may be the 1st); such rows are merged.
   */
  function periodRows(userId: number): Row[] {
    const now = new Date();
    const y = now.getUTCFullYear();
    const m = now.getUTCMonth();
    const quarterMonth = m - (m % 3);
    const dates = [
      today(),
      daysAgo(1),
      utcDay(y, m, 1),
      utcDay(y, m, 0),
      utcDay(y, quarterMonth, 1),
      utcDay(y, quarterMonth, 0),
      daysAgo(200),
    ];
    const byDate = new Map<string, Row>();
    dates.forEach((date, k) => {
      const r = byDate.get(date) ?? { user_id: userId, date, bytes_in: 0, bytes_out: 0 };
      r.bytes_in += 2 ** (2 * k);
      r.bytes_out += 2 ** (2 * k + 1);
      byDate.set(date, r);
    });
    return [...byDate.values()];
  }

  /** The first date of the period that holds today, computed here independently. */
  function periodStart(period: "daily" | "monthly" | "quarterly"): string {
    const now = new Date();
    const y = now.getUTCFullYear();
    const m = now.getUTCMonth();
    if (period === "daily") return today();
    if (period === "monthly") return utcDay(y, m, 1);
    return utcDay(y, m - (m % 3), 1);
  }

  const usedSince = (rows: Row[], from: string) =>
    rows.filter((r) => r.date >= from && r.date <= today()).reduce((sum, r) => sum + r.bytes_in + r.bytes_out, 0);

  async function trafficUsed(userId: number): Promise<number> {
    const res = await api.get(`/api/users/${userId}`);
    expect(res.status).toBe(200);
    return res.body.traffic_used;
  }

  async function setPeriod(userId: number, period: string) {
    const res = await api.put(`/api/users/${userId}`, { traffic_period: period });
    expect(res.status).toBe(200);
    expect((await api.get(`/api/users/${userId}`)).body.user.traffic_period).toBe(period);
  }

  test("is 0 for a user without traffic", async () => {
    const userId = await api.createUser("used-none");
    expect(await trafficUsed(userId)).toBe(0);
  });

  test("counts today's bytes in and out for the daily period", async () => {
    const userId = await api.createUser("used-daily");
    const rows = periodRows(userId);
    insertTraffic(server, rows);
    await setPeriod(userId, "daily");
    const todays = rows.find((r) => r.date === today())!;
    expect(await trafficUsed(userId)).toBe(todays.bytes_in + todays.bytes_out);
    expect(await trafficUsed(userId)).toBe(usedSince(rows, periodStart("daily")));
  });

  test("counts since the 1st of this month for the monthly period, the default", async () => {
    const userId = await api.createUser("used-monthly");
    const rows = periodRows(userId);
    insertTraffic(server, rows);
    expect((await api.get(`/api/users/${userId}`)).body.user.traffic_period).toBe("monthly");
    const firstOfMonth = periodStart("monthly");
    const before = rows.filter((r) => r.date < firstOfMonth).reduce((s, r) => s + r.bytes_in + r.bytes_out, 0);
    expect(before).toBeGreaterThan(0); // the last day of the previous month has a row
    expect(await trafficUsed(userId)).toBe(usedSince(rows, "0000-00-00") - before);
    expect(await trafficUsed(userId)).toBe(usedSince(rows, firstOfMonth));
  });

  test("counts yesterday in the monthly period exactly when today is not the 1st", async () => {
    const userId = await api.createUser("used-yesterday");
    insertTraffic(server, [
      { user_id: userId, date: today(), bytes_in: 1, bytes_out: 2 },
      { user_id: userId, date: daysAgo(1), bytes_in: 40, bytes_out: 60 },
    ]);
    const isFirst = new Date().getUTCDate() === 1;
    expect(await trafficUsed(userId)).toBe(isFirst ? 3 : 103);
    await setPeriod(userId, "daily");
    expect(await trafficUsed(userId)).toBe(3);
  });

  test("counts since the 1st of the quarter's first month for the quarterly period", async () => {
    const userId = await api.createUser("used-quarterly");
    const rows = periodRows(userId);
    insertTraffic(server, rows);
    await setPeriod(userId, "quarterly");
    const from = periodStart("quarterly");
    expect(["01", "04", "07", "10"]).toContain(from.slice(5, 7));
    // the day before the quarter and the row 200 days ago never count
    const outside = rows.filter((r) => r.date < from).reduce((s, r) => s + r.bytes_in + r.bytes_out, 0);
    expect(outside).toBeGreaterThan(0);
    expect(await trafficUsed(userId)).toBe(usedSince(rows, "0000-00-00") - outside);
    expect(await trafficUsed(userId)).toBe(usedSince(rows, from));
  });

  test("counts a row on the first day of the quarter and not one on the day before it", async () => {
    const userId = await api.createUser("used-quarter-edge");
    const from = periodStart("quarterly");
    insertTraffic(server, [
      { user_id: userId, date: from, bytes_in: 500, bytes_out: 5 },
      { user_id: userId, date: plusDays(from, -1), bytes_in: 70_000, bytes_out: 7 },
    ]);
    await setPeriod(userId, "quarterly");
    expect(await trafficUsed(userId)).toBe(505);
  });

  test("follows the period as it is switched back and forth", async () => {
    const userId = await api.createUser("used-switch");
    const rows = periodRows(userId);
    insertTraffic(server, rows);
    for (const period of ["daily", "quarterly", "monthly", "daily", "monthly", "quarterly"] as const) {
      await setPeriod(userId, period);
      expect({ period, used: await trafficUsed(userId) }).toEqual({ period, used: usedSince(rows, periodStart(period)) });
    }
  });

  test("counts only the user's own traffic", async () => {
    const userId = await api.createUser("used-own");
    const neighbour = await api.createUser("used-neighbour");
    insertTraffic(server, [
      { user_id: userId, date: today(), bytes_in: 7, bytes_out: 8 },
      { user_id: neighbour, date: today(), bytes_in: 1_000, bytes_out: 1_000 },
    ]);
    for (const period of ["daily", "monthly", "quarterly"]) {
      await setPeriod(userId, period);
      expect(await trafficUsed(userId)).toBe(15);
    }
  });
});
