/**
 * The audit log's rules on a real database and a fake clock: entries listed
 * newest first with filters and paging, repeated events counted into one
 * row per address, code and minute (with a bound on rows a minute and on
 * memory), pruning by age, and that writing never throws.
 */
import { afterEach, describe, expect, spyOn, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createAudit, MAX_ROWS_PER_MINUTE, type Audit } from "../../src/core/audit.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";

const MIN = 60_000;
const DAY = 86_400_000;

let opened: OpenedDb[] = [];
let dirs: string[] = [];
afterEach(() => {
  for (const o of opened) o.close();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  opened = [];
  dirs = [];
});

function setup(start = Date.UTC(2026, 10, 23, 12, 0, 0)) {
  const dir = mkdtempSync(join(tmpdir(), "burrow-audit-"));
  dirs.push(dir);
  const database = quietly(() => openDatabase(dir));
  opened.push(database);
  let t = start;
  const clock = { now: () => new Date(t) };
  const audit = createAudit(database.store, clock);
  const rows = () => database.sqlite.query<Record<string, any>, []>("SELECT * FROM audit_log ORDER BY id").all();
  return { audit, database, rows, advance: (ms: number) => void (t += ms) };
}

/** openDatabase logs nothing on a fresh dir, but keep test output clean whatever it says. */
function quietly<T>(fn: () => T): T {
  const spy = spyOn(console, "log").mockImplementation(() => {});
  try {
    return fn();
  } finally {
    spy.mockRestore();
  }
}

const refusal = (audit: Audit, address: string, code = "AUTH_FAILED") =>
  audit.repeated({ action: "agent.refused", address, outcome: "refused", code });

describe("entries", () => {
  test("are listed newest first, filtered by user and action, paged by before_id", async () => {
    const { audit } = setup();
    for (let i = 0; i < 5; i++) await audit.record({ action: "user.create", address: "10.0.0.1", outcome: "ok", userId: 1, username: "admin", target: `user:${i + 10}` });
    await audit.record({ action: "token.revoke", address: "10.0.0.2", outcome: "ok", userId: 2, username: "ops", target: "token:3" });
    const all = await audit.list({ limit: 100 });
    expect(all.map((e) => e.id)).toEqual([6, 5, 4, 3, 2, 1]);
    expect((await audit.list({ limit: 100, userId: 2 })).map((e) => e.target)).toEqual(["token:3"]);
    expect(await audit.list({ limit: 100, action: "user.create" })).toHaveLength(5);
    const first = await audit.list({ limit: 2 });
    expect(first.map((e) => e.id)).toEqual([6, 5]);
    const next = await audit.list({ limit: 2, beforeId: first.at(-1)!.id });
    expect(next.map((e) => e.id)).toEqual([4, 3]);
    expect(await audit.list({ limit: 10, beforeId: 1 })).toEqual([]);
  });

  test("details are stored as JSON; none at all is null", async () => {
    const { audit, rows } = setup();
    await audit.record({ action: "user.update", address: "::1", outcome: "ok", details: { changes: { enabled: { from: true, to: false } } } });
    await audit.record({ action: "auth.logout", address: "::1", outcome: "ok", details: {} });
    expect(JSON.parse(rows()[0]!.details)).toEqual({ changes: { enabled: { from: true, to: false } } });
    expect(rows()[1]!.details).toBeNull();
  });

  test("writing never throws: a broken table is counted and logged (one line for both writes, within 10 s) and the caller goes on", async () => {
    const { audit, database } = setup();
    database.sqlite.run("DROP TABLE audit_log");
    const errors: string[] = [];
    const spy = spyOn(console, "error").mockImplementation((...a: unknown[]) => void errors.push(a.join(" ")));
    try {
      expect(await audit.record({ action: "user.create", address: "::1", outcome: "ok" })).toBeUndefined();
      expect(() => refusal(audit, "10.0.0.1")).not.toThrow();
      await audit.settled();
    } finally {
      spy.mockRestore();
    }
    expect(errors.filter((l) => l.includes("audit log: entry not written"))).toHaveLength(1);
    expect(audit.writeFailures).toBe(2);
  });
});

describe("repeated events", () => {
  test("one row per address, code and minute; the count is written on flush", async () => {
    const { audit, rows, advance } = setup();
    for (let i = 0; i < 1000; i++) refusal(audit, "10.0.0.1");
    for (let i = 0; i < 10; i++) refusal(audit, "10.0.0.1", "RATE_LIMITED");
    for (let i = 0; i < 3; i++) refusal(audit, "10.0.0.2");
    // the first of each bucket is written at once, counted 1
    await audit.settled();
    expect(rows().map((r) => [r.address, r.code, r.count])).toEqual([
      ["10.0.0.1", "AUTH_FAILED", 1],
      ["10.0.0.1", "RATE_LIMITED", 1],
      ["10.0.0.2", "AUTH_FAILED", 1],
    ]);
    await audit.flush();
    expect(rows().map((r) => r.count)).toEqual([1000, 10, 3]);
    // the next minute is a new row
    advance(MIN);
    refusal(audit, "10.0.0.1");
    refusal(audit, "10.0.0.1");
    await audit.stop();
    expect(rows().map((r) => r.count)).toEqual([1000, 10, 3, 2]);
  });

  test("who it was is asked once per row, not once per event", async () => {
    const { audit, rows } = setup();
    let asked = 0;
    for (let i = 0; i < 500; i++) {
      audit.repeated({
        action: "agent.refused",
        address: "10.0.0.9",
        outcome: "refused",
        code: "TOKEN_DISABLED",
        identify: () => (asked++, { userId: 7, username: "alice", tokenId: 3 }),
      });
    }
    await audit.stop();
    expect(asked).toBe(1);
    expect(rows()).toMatchObject([{ user_id: 7, username: "alice", token_id: 3, count: 500 }]);
  });

  test("a flood from many addresses adds at most MAX_ROWS_PER_MINUTE rows a minute, the rest in one row '*'", async () => {
    const { audit, rows } = setup();
    const addresses = 3 * MAX_ROWS_PER_MINUTE;
    for (let round = 0; round < 5; round++) for (let a = 0; a < addresses; a++) refusal(audit, `fd00::${a.toString(16)}`);
    await audit.stop();
    const all = rows();
    expect(all).toHaveLength(MAX_ROWS_PER_MINUTE + 1);
    const overflow = all.find((r) => r.address === "*")!;
    expect(overflow.count).toBe(5 * addresses - MAX_ROWS_PER_MINUTE * 5);
    expect(all.reduce((n, r) => n + r.count, 0)).toBe(5 * addresses);
  });

  test("a row forgotten from memory (a restart) is counted on, not written twice", async () => {
    const { audit, database, rows } = setup();
    refusal(audit, "10.0.0.1");
    await audit.stop();
    const again = createAudit(database.store, { now: () => new Date(Date.UTC(2026, 10, 23, 12, 0, 30)) });
    refusal(again, "10.0.0.1");
    await again.stop();
    expect(rows().map((r) => r.count)).toEqual([2]);
  });
});

describe("pruning", () => {
  test("deletes entries older than the given days, counted rows included, and keeps the rest", async () => {
    const { audit, rows, advance } = setup();
    await audit.record({ action: "user.create", address: "::1", outcome: "ok" });
    refusal(audit, "10.0.0.1");
    advance(50 * DAY);
    await audit.record({ action: "user.delete", address: "::1", outcome: "ok" });
    advance(41 * DAY);
    expect(await audit.prune(90)).toBe(2);
    expect(rows().map((r) => r.action)).toEqual(["user.delete"]);
    expect(await audit.prune(90)).toBe(0);
    advance(50 * DAY);
    expect(await audit.prune(90)).toBe(1);
    expect(rows()).toEqual([]);
  });
});
