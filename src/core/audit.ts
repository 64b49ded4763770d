/**
 * The audit log: what admins did (every write of the admin API, signing in
 * and out included) and what the agents' endpoint refused, with when, who,
 * from where and how it ended. One table, read newest first.
 *
 * Writing it never fails what it records: a failed write is counted
 * (writeFailures, burrow_audit_write_failures_total) and logged, once every
 * 10 s: a warning while the database is out of reach, an error otherwise
 * (rate-limited too, since a stranger's failed logins can cause one each). Anything anyone on the internet can cause over and over (a
 * refused handshake, a failed login) goes through `repeated()`: one row per
 * action, address, code (and attempted username) and minute, whose count
 * grows in memory and is written every few seconds. A flood of thousands a
 * second is then a few rows a minute, and a flood from many addresses at
 * most MAX_ROWS_PER_MINUTE rows a minute plus one row "*" per code for the
 * rest; memory holds at most MAX_BUCKETS counters.
 */
import { databaseUnavailable, reportUnavailable } from "../db/unavailable.ts";
import { and, count, desc, eq, lt, sql, type SQL } from "drizzle-orm";
import type { AuditRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { quietWarnings } from "../log.ts";
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
  "ssh-key.create",
  "ssh-key.delete",
  "token.config",
  "domain.reserve",
  "domain.release",
  "hostname.create",
  "hostname.verify",
  "hostname.delete",
  "policy.create",
  "policy.update",
  "policy.delete",
  "webhook.create",
  "webhook.update",
  "webhook.delete",
  "webhook.rotate",
  "webhook.retry",
  "key.create",
  "key.revoke",
  "database.backup",
  "agent.refused",
  "agent.restart",
  "agent.update",
  // the portal: a user acting on their own things (the actor is the user)
  "portal.login",
  "portal.logout",
  "portal.password",
  "device.approve",
  "device.deny",
  "device.login",
  "device.config",
  "invitation.create",
  "invitation.delete",
  "invitation.accept",
  // `burrow connect`: a user reached a private tunnel shared with them
  "private.connect",
  // the SSH gateway: a key signed in (its forwards and reaches follow), or was refused
  "ssh.session",
  "ssh.refused",
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
  identify?: () => Promise<Identified | undefined> | Identified | undefined;
}

type Identified = AuditActor & { details?: Record<string, unknown> };

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
  /** The row's id, once its insert is done. */
  id?: number;
  /** Counted since the last flush. */
  pending: number;
  minute: string;
}

export type Audit = ReturnType<typeof createAudit>;

export function createAudit(store: Store, clock: Clock) {
  const { auditLog } = store.tables;
  let buckets = new Map<string, Bucket>();
  /** First rows of buckets being written. */
  const writing = new Set<Promise<void>>();
  const settled = async () => {
    while (writing.size > 0) await Promise.allSettled([...writing]);
  };
  let thisMinute = { minute: "", rows: 0 };
  let timer: ReturnType<typeof setInterval> | undefined;
  /** Entries and counts the database did not take, since start. */
  let writeFailures = 0;
  const fault = quietWarnings(10_000, Date.now, "error");

  /** The audit log is a security record: a write it lost is counted and said, never only dropped. */
  function failed(what: string, fields: Record<string, unknown>, err: unknown): void {
    writeFailures++;
    if (databaseUnavailable(err)) reportUnavailable(what, err);
    else fault(what, what, { ...fields, err: String(err) });
  }

  const minuteOf = (d: Date) => isoTimestamp(d).slice(0, 16); // "2026-11-23T15:04"

  async function insert(entry: AuditEntry, bucket?: string, at = clock.now()): Promise<number> {
    const q = store.db
      .insert(auditLog)
      .values({
        at: isoTimestamp(at),
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
      .returning({ id: auditLog.id });
    return (await store.get(q))!.id;
  }

  /** Writes the counts gathered since the last flush; forgets the buckets of minutes gone by. */
  async function flush(from = buckets): Promise<void> {
    await settled(); // every bucket has its row, and so an id to count on
    const current = minuteOf(clock.now());
    // taken now: what is counted while the writes are under way waits for the next flush
    const writes: { id: number; n: number }[] = [];
    for (const b of from.values()) {
      if (b.pending === 0 || b.id === undefined) continue;
      writes.push({ id: b.id, n: b.pending });
      b.pending = 0;
    }
    for (const [key, b] of from) if (b.minute !== current || b.id === undefined) from.delete(key);
    if (writes.length > 0) {
      try {
        await store.transaction(async () => {
          for (const w of writes) {
            await store.run(store.db.update(auditLog).set({ count: sql`${auditLog.count} + ${w.n}` }).where(eq(auditLog.id, w.id)));
          }
        });
      } catch (err) {
        failed("audit log: counts not written", {}, err);
      }
    }
    if (buckets.size === 0 && timer) {
      clearInterval(timer);
      timer = undefined;
    }
  }

  return {
    /** Writes that failed since start (the metrics' burrow_audit_write_failures_total). */
    get writeFailures(): number {
      return writeFailures;
    },

    /** Writes one entry now. Never rejects: a failure is counted and logged, and the request goes on. */
    async record(entry: AuditEntry): Promise<void> {
      try {
        await insert(entry);
      } catch (err) {
        failed("audit log: entry not written", { action: entry.action, outcome: entry.outcome }, err);
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
          void flush(buckets);
          buckets = new Map();
        }
        // counted from now on; the row (and with it the id the counts go to) is written next
        const bucket: Bucket = { pending: 0, minute };
        const at = clock.now(); // when it happened, not when its row is written
        buckets.set(key, bucket);
        thisMinute.rows++;
        const firstRow = async () => {
          const who = address === "*" ? undefined : await entry.identify?.();
          const { details, ...actor } = who ?? {};
          bucket.id = await insert({ action: entry.action, address, outcome: entry.outcome, code: entry.code, ...actor, details }, key, at);
        };
        const written = firstRow()
          .catch((err) => {
            if (buckets.get(key) === bucket) buckets.delete(key);
            failed("audit log: entry not written", { action: entry.action, outcome: entry.outcome }, err);
          })
          .finally(() => writing.delete(written));
        writing.add(written);
        if (!timer) {
          timer = setInterval(() => void flush(), FLUSH_EVERY_MS);
          timer.unref(); // never what keeps the server running
        }
      } catch (err) {
        failed("audit log: entry not written", { action: entry.action, outcome: entry.outcome }, err);
      }
    },

    /** Newest first. */
    list(q: AuditQuery): Promise<AuditRow[]> {
      const where: SQL[] = [];
      if (q.beforeId !== undefined) where.push(lt(auditLog.id, q.beforeId));
      if (q.userId !== undefined) where.push(eq(auditLog.userId, q.userId));
      if (q.action !== undefined) where.push(eq(auditLog.action, q.action));
      return store.all(
        store.db
          .select()
          .from(auditLog)
          .where(and(...where))
          .orderBy(desc(auditLog.id))
          .limit(q.limit),
      );
    },

    /** Deletes entries older than `days` days; returns how many went. */
    async prune(days: number): Promise<number> {
      await flush();
      const cutoff = isoTimestamp(new Date(clock.now().getTime() - days * DAY_MS));
      const old = lt(auditLog.at, cutoff);
      return store.transaction(async () => {
        const n = (await store.get(store.db.select({ n: count() }).from(auditLog).where(old)))?.n ?? 0;
        if (n > 0) await store.run(store.db.delete(auditLog).where(old));
        return n;
      });
    },

    /** Writes pending counts now (on shutdown, and for tests). */
    flush: () => flush(),

    /** Resolves when the rows of new buckets are written (for tests). */
    settled,

    /** Writes pending counts and stops the timer. */
    async stop(): Promise<void> {
      if (timer) clearInterval(timer);
      timer = undefined;
      await flush();
      buckets.clear();
    },
  };
}
