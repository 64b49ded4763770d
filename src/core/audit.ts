/**
 * The audit log: what admins did (every write of the admin API, signing in
 * and out included) and what the agents' endpoint refused, with when, who,
 * from where and how it ended. One table, read newest first.
 *
 * Writing it never fails what it records: a failed insert is logged and
 * forgotten. Anything anyone on the internet can cause over and over (a
 * refused handshake, a failed login) goes through `repeated()`: one row per
 * action, address, code (and attempted username) and minute, whose count
 * grows in memory and is written every few seconds. A flood of thousands a
 * second is then a few rows a minute, and a flood from many addresses at
 * most MAX_ROWS_PER_MINUTE rows a minute plus one row "*" per code for the
 * rest; memory holds at most MAX_BUCKETS counters.
 */
import { and, count, desc, eq, lt, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db/open.ts";
import { auditLog, type AuditRow } from "../db/schema.ts";
import { log } from "../log.ts";
import { isoTimestamp, type Clock } from "./clock.ts";

export type AuditOutcome = "ok" | "failed" | "refused";

/** The actions written to the log; stable names, filterable with ?action=. */
export const AUDIT_ACTIONS = [
  "auth.login",
  "auth.logout",
  "user.create",
  "user.update",
  "user.delete",
  "token.create",
  "token.revoke",
  "domain.reserve",
  "domain.release",
  "key.create",
  "key.revoke",
  "database.backup",
  "agent.refused",
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who did it: an admin (by session or key), or the agent's user when a refusal knows it. */
export interface AuditActor {
  userId?: number;
  username?: string;
  keyId?: number;
  tokenId?: number;
}

export interface AuditEntry extends AuditActor {
  action: AuditAction;
  address: string;
  outcome: AuditOutcome;
  /** What was acted on, e.g. "user:5". */
  target?: string;
  /** The error code of a failure or refusal. */
  code?: string;
  /** Changed fields and such: never a password, a secret or a hash. */
  details?: Record<string, unknown>;
}

/** A repeated event: counted per action, address, code, `key` and minute. */
export interface RepeatedEntry {
  action: AuditAction;
  address: string;
  outcome: AuditOutcome;
  code: string;
  /** Sets apart buckets of one address and code, e.g. the username a failed login tried. */
  key?: string;
  /** Who it concerns, asked only when its bucket's row is first written (it may cost a query). */
  identify?: () => (AuditActor & { details?: Record<string, unknown> }) | undefined;
}

export interface AuditQuery {
  /** 1..MAX_AUDIT_LIMIT */
  limit: number;
  /** Entries older than this one (smaller ids). */
  beforeId?: number;
  userId?: number;
  action?: string;
}

export const DEFAULT_AUDIT_LIMIT = 100;
export const MAX_AUDIT_LIMIT = 1000;
export const DEFAULT_AUDIT_DAYS = 90;

/** How often repeated events' counts are written. */
export const FLUSH_EVERY_MS = 5_000;
/** Counters held in memory at most; past it they are written and forgotten (the row's upsert picks up again). */
const MAX_BUCKETS = 10_000;
/** Rows repeated events may add in one minute; the rest of that minute goes to one row per action and code with address "*". */
export const MAX_ROWS_PER_MINUTE = 200;
const DAY_MS = 86_400_000;

interface Bucket {
  id: number;
  /** Counted since the last flush. */
  pending: number;
  minute: string;
}

export type Audit = ReturnType<typeof createAudit>;

export function createAudit(db: Db, clock: Clock) {
  const buckets = new Map<string, Bucket>();
  let thisMinute = { minute: "", rows: 0 };
  let timer: ReturnType<typeof setInterval> | undefined;

  const minuteOf = (d: Date) => isoTimestamp(d).slice(0, 16); // "2026-11-23T15:04"

  function insert(entry: AuditEntry, bucket?: string): number {
    return db
      .insert(auditLog)
      .values({
        at: isoTimestamp(clock.now()),
        userId: entry.userId,
        username: entry.username,
        keyId: entry.keyId,
        tokenId: entry.tokenId,
        address: entry.address,
        action: entry.action,
        target: entry.target,
        outcome: entry.outcome,
        code: entry.code,
        details: entry.details && Object.keys(entry.details).length > 0 ? JSON.stringify(entry.details) : null,
        bucket,
      })
      // a bucket forgotten from memory (or from before a restart) finds its row again
      .onConflictDoUpdate({ target: auditLog.bucket, set: { count: sql`${auditLog.count} + 1` } })
      .returning({ id: auditLog.id })
      .get()!.id;
  }

  /** Writes the counts gathered since the last flush; forgets the buckets of minutes gone by. */
  function flush(): void {
    const current = minuteOf(clock.now());
    try {
      db.transaction((tx) => {
        for (const b of buckets.values()) {
          if (b.pending === 0) continue;
          tx.update(auditLog).set({ count: sql`${auditLog.count} + ${b.pending}` }).where(eq(auditLog.id, b.id)).run();
          b.pending = 0;
        }
      });
    } catch (err) {
      log.error("audit log: counts not written", { err: String(err) });
    }
    for (const [key, b] of buckets) if (b.minute !== current) buckets.delete(key);
    if (buckets.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    /** Writes one entry now. Never throws: a failure is logged, and the request goes on. */
    record(entry: AuditEntry): void {
      try {
        insert(entry);
      } catch (err) {
        log.error("audit log: entry not written", { action: entry.action, outcome: entry.outcome, err: String(err) });
      }
    },

    /** Counts one of a repeatable event; its bucket's row is written at once, the count every FLUSH_EVERY_MS. */
    repeated(entry: RepeatedEntry): void {
      try {
        const minute = minuteOf(clock.now());
        if (thisMinute.minute !== minute) thisMinute = { minute, rows: 0 };
        let key = [entry.action, entry.address, entry.code, entry.key ?? "", minute].join("|");
        let address = entry.address;
        const known = buckets.get(key);
        if (known) return void known.pending++;
        if (thisMinute.rows >= MAX_ROWS_PER_MINUTE) {
          address = "*";
          key = [entry.action, "*", entry.code, "", minute].join("|");
          const overflow = buckets.get(key);
          if (overflow) return void overflow.pending++;
        }
        if (buckets.size >= MAX_BUCKETS) {
          flush();
          buckets.clear();
        }
        const who = address === "*" ? undefined : entry.identify?.();
        const { details, ...actor } = who ?? {};
        const id = insert({ action: entry.action, address, outcome: entry.outcome, code: entry.code, ...actor, details }, key);
        thisMinute.rows++;
        buckets.set(key, { id, pending: 0, minute });
        if (!timer) {
          timer = setInterval(flush, FLUSH_EVERY_MS);
          timer.unref(); // never what keeps the server running
        }
      } catch (err) {
        log.error("audit log: entry not written", { action: entry.action, outcome: entry.outcome, err: String(err) });
      }
    },

    /** Newest first. */
    list(q: AuditQuery): AuditRow[] {
      const where: SQL[] = [];
      if (q.beforeId !== undefined) where.push(lt(auditLog.id, q.beforeId));
      if (q.userId !== undefined) where.push(eq(auditLog.userId, q.userId));
      if (q.action !== undefined) where.push(eq(auditLog.action, q.action));
      return db
        .select()
        .from(auditLog)
        .where(and(...where))
        .orderBy(desc(auditLog.id))
        .limit(q.limit)
        .all();
    },

    /** Deletes entries older than `days` days; returns how many went. */
    prune(days: number): number {
      flush();
      const cutoff = isoTimestamp(new Date(clock.now().getTime() - days * DAY_MS));
      const old = lt(auditLog.at, cutoff);
      return db.transaction((tx) => {
        const n = tx.select({ n: count() }).from(auditLog).where(old).get()?.n ?? 0;
        if (n > 0) tx.delete(auditLog).where(old).run();
        return n;
      });
    },

    /** Writes pending counts now (on shutdown, and for tests). */
    flush,

    /** Writes pending counts and stops the timer. */
    stop(): void {
      flush();
      if (timer) clearInterval(timer);
      timer = undefined;
      buckets.clear();
    },
  };
}
