/**
 * The traffic policies' rate limits over every node of a cluster
 * (policy/synced-rate-limit-store.ts): every --policy-rate-limit-sync ms a
 * node tells the others, by NOTIFY on a channel of their own, what it
 * counted in each bucket since it last said, and adds what they say to its
 * own counts. Nothing is awaited on a request's path: a request is judged
 * on this node's counts, which lag the others' by about one interval, so
 * the cluster lets through at most the capacity plus what the other nodes
 * let through in one interval (docs/policy.md's rate-limit). A node that
 * starts, or that could not hear for a while, knows the others' counts from
 * their next deltas on. What arrives is read without trusting it (anyone
 * with NOTIFY rights on the database could send it): a payload of another
 * shape is dropped whole.
 */
import type { SQL } from "bun";
import { quietWarnings } from "../log.ts";
import type { RateLimitDelta, SyncedRateLimitStore } from "../policy/synced-rate-limit-store.ts";

/** The NOTIFY channel of the rate limits' deltas (apart from cluster.ts's, whose messages are read by a schema each). */
const CHANNEL = "burrow_rate_limits";
/** --policy-rate-limit-sync's default. */
export const DEFAULT_SYNC_MS = 250;
/** Buckets told per interval at most; the rest wait for the next one. */
export const MAX_DELTAS_PER_SYNC = 4_000;
/** A payload's bytes at most (NOTIFY takes up to 8,000). */
const MAX_PAYLOAD = 7_500;
/** A delta's fields as they are read: a digest of 22 base64url characters, a window within a day, a count. */
const DIGEST = /^[A-Za-z0-9_-]{22}$/;
const MAX_WINDOW_MS = 24 * 3_600_000;

export class RateLimitSync {
  private timer: ReturnType<typeof setInterval> | undefined;
  private unlisten?: () => Promise<void>;
  private readonly failures = quietWarnings(10_000);
  /** Deltas told and heard, for the log and the tests. */
  told = 0;
  heard = 0;

  constructor(
    private readonly sql: SQL,
    private readonly nodeId: string,
    readonly store: SyncedRateLimitStore,
    private readonly intervalMs = DEFAULT_SYNC_MS,
  ) {}

  async start(): Promise<void> {
    const subscription = await this.sql.listen(CHANNEL, (payload) => this.received(payload));
    this.unlisten = () => subscription.unlisten();
    this.timer = setInterval(() => void this.tell(), this.intervalMs);
    this.timer.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    // what was counted last is told before the node goes
    await this.tell();
    await this.unlisten?.().catch(() => {});
  }

  /** This node's deltas since the last time, in as few NOTIFYs as fit. */
  private async tell(): Promise<void> {
    const deltas = this.store.takeDeltas(MAX_DELTAS_PER_SYNC);
    if (deltas.length === 0) return;
    const payloads: string[] = [];
    let batch: RateLimitDelta[] = [];
    let size = 0;
    const head = JSON.stringify({ f: this.nodeId, d: [] }).length;
    for (const d of deltas) {
      const bytes = JSON.stringify(d).length + 1;
      if (batch.length > 0 && head + size + bytes > MAX_PAYLOAD) {
        payloads.push(JSON.stringify({ f: this.nodeId, d: batch }));
        batch = [];
        size = 0;
      }
      batch.push(d);
      size += bytes;
    }
    payloads.push(JSON.stringify({ f: this.nodeId, d: batch }));
    try {
      for (const p of payloads) await this.sql`SELECT pg_notify(${CHANNEL}, ${p})`;
      this.told += deltas.length;
    } catch (err) {
      // the counts of this interval stay this node's own: the limit holds here, the others learn of the next
      this.failures("rate-limit sync", "rate-limit counts not told to the other nodes", { err: String((err as Error)?.message ?? err).slice(0, 200) });
    }
  }

  private received(payload: string): void {
    const deltas = readDeltas(payload, this.nodeId);
    if (deltas === undefined) return;
    this.heard += deltas.length;
    this.store.addRemote(deltas, Date.now());
  }
}

/** The deltas of another node's payload; undefined for this node's own, or for one of another shape. */
export function readDeltas(payload: string, self: string): RateLimitDelta[] | undefined {
  let raw: unknown;
  try {
    raw = JSON.parse(payload);
  } catch {
    return undefined;
  }
  if (typeof raw !== "object" || raw === null) return undefined;
  const { f, d } = raw as { f?: unknown; d?: unknown };
  if (typeof f !== "string" || f === self || !Array.isArray(d)) return undefined;
  for (const e of d) {
    if (!Array.isArray(e) || e.length !== 4) return undefined;
    const [digest, start, windowMs, n] = e as unknown[];
    if (typeof digest !== "string" || !DIGEST.test(digest)) return undefined;
    if (!Number.isSafeInteger(start) || !Number.isSafeInteger(windowMs) || !Number.isSafeInteger(n)) return undefined;
    if ((windowMs as number) < 1000 || (windowMs as number) > MAX_WINDOW_MS || (start as number) % (windowMs as number) !== 0 || (n as number) < 1 || (n as number) > 2_000_000_000) return undefined;
  }
  return d as RateLimitDelta[];
}
