/**
 * Alerts (alert.*): what an operator wants to hear without Prometheus, as
 * events for --alert-webhook (or any webhook subscribed to `alert.*`):
 *
 * - a node down (cluster/cluster.ts tells nodeDown(), with node.down);
 * - a certificate within 14 days of its end whose renewal failed (looked
 *   at hourly and right after each order's end, said once a day per
 *   certificate), beside certificate.expiring for any certificate that
 *   close to its end, and certificate.issued and .failed as the renewal
 *   reports them;
 * - the database unavailable: the outbox is in that database, so this one
 *   is posted straight to --alert-webhook from memory, signed with its
 *   secret as kept at the last look, when it starts and every
 *   UNAVAILABLE_REPEAT_MS while it lasts;
 * - descriptors past 80 % of the open-file limit (looked at every 10 s);
 * - the outbox backing up: more deliveries waiting than
 *   --alert-outbox-pending (as the worker counts them every few seconds).
 *
 * Each is said at most once an hour (REPEAT_MS) while it lasts.
 */
import type { Core } from "../core/index.ts";
import type { EventInput } from "../core/events/outbox.ts";
import { signedHeaders } from "../core/events/signing.ts";
import { onDatabaseUnavailable } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { descriptorsInUse, openFileLimit } from "../os/descriptors.ts";
import { postSigned, type PostLimits } from "./post.ts";

/** A certificate this close to its end is expiring. */
export const EXPIRING_MS = 14 * 86_400_000;
/** The share of the open-file limit past which descriptors are under pressure. */
export const DESCRIPTOR_PRESSURE = 0.8;
const REPEAT_MS = 3_600_000;
const UNAVAILABLE_REPEAT_MS = 10 * 60_000;
/** An outage is over once no query met it for this long. */
const OUTAGE_OVER_MS = 60_000;
const LOOK = { certificates: 3_600_000, descriptors: 10_000, outbox: 5_000, flagRow: 60_000 };

/** A certificate as the report shows it (acme/report.ts). */
export interface CertificateSeen {
  id: string;
  names: string[];
  not_after: string | null;
  last_error: { code: string; message: string } | null;
}

export interface AlertOptions {
  /** This node's name in alerts. */
  node: string;
  /** --alert-outbox-pending. */
  outboxPending: number;
  /** Deliveries waiting now, as the worker last counted them. */
  pending: () => number;
  /** The certificates in use (ACME's); none: nothing to look at. */
  certificates?: () => CertificateSeen[];
  /** How the database alert is posted (--webhook-timeout and the rest). */
  post: PostLimits;
  /** Whether --alert-webhook is set: the database alert goes to it only. */
  direct: boolean;
  /** Descriptors open and the open-file limit (the process's own unless told). */
  descriptors?: () => { open?: number; limit?: number };
}

export class Alerts {
  private timers: ReturnType<typeof setInterval>[] = [];
  private readonly lastSaid = new Map<string, number>();
  private flagRow?: { url: string; secret: string };
  private outage?: { since: number; lastSeen: number; lastSaid: number };
  private unlisten?: () => void;

  constructor(
    private readonly core: Core,
    private readonly opts: AlertOptions,
  ) {}

  start(): void {
    const every = (ms: number, fn: () => Promise<void> | void) => {
      const run = () => void Promise.resolve(fn()).catch((err) => log.warn("alert check failed", { err: String(err) }));
      const t = setInterval(run, ms);
      t.unref?.();
      this.timers.push(t);
      run();
    };
    every(LOOK.descriptors, () => this.lookAtDescriptors());
    every(LOOK.outbox, () => this.lookAtOutbox());
    if (this.opts.certificates) every(LOOK.certificates, () => this.lookAtCertificates());
    if (this.opts.direct) {
      every(LOOK.flagRow, () => this.keepFlagRow());
      this.unlisten = onDatabaseUnavailable(() => this.databaseUnavailable());
    }
  }

  stop(): void {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.unlisten?.();
  }

  /** Said once per `key` per REPEAT_MS (or `repeatMs`). */
  private once(key: string, repeatMs = REPEAT_MS): boolean {
    const now = Date.now();
    const last = this.lastSaid.get(key);
    if (last !== undefined && now - last < repeatMs) return false;
    this.lastSaid.set(key, now);
    return true;
  }

  private say(input: EventInput): void {
    this.core.events.later(input);
  }

  /** A node of the cluster was taken for dead by this one. */
  nodeDown(node: string, lastHeartbeat: Date): void {
    const at = lastHeartbeat.toISOString();
    this.say({ type: "node.down", data: { node, last_heartbeat: at } });
    this.say({ type: "alert.node_down", data: { message: `node ${node} is down: no heartbeat since ${at}`, severity: "critical", node: this.opts.node, down: node } });
  }

  /**
   * How an order for a certificate ended; then the certificates are looked
   * at again, so that a renewal failing close to a certificate's end is an
   * alert now rather than at the next hourly look.
   */
  certificateResult(r: { names: string[]; ok: true; notAfter: Date } | { names: string[]; ok: false; code: string; message: string; notAfter: Date | null }): void {
    if (r.ok) this.say({ type: "certificate.issued", data: { names: r.names, not_after: r.notAfter.toISOString() } });
    else this.say({ type: "certificate.failed", data: { names: r.names, code: r.code, message: r.message.slice(0, 500), not_after: r.notAfter?.toISOString() ?? null } });
    if (this.timers.length > 0) this.lookAtCertificates();
  }

  private lookAtCertificates(): void {
    const now = Date.now();
    for (const c of this.opts.certificates?.() ?? []) {
      if (c.not_after === null) continue;
      const left = Date.parse(c.not_after) - now;
      if (left > EXPIRING_MS) continue;
      const day = new Date(now).toISOString().slice(0, 10);
      const daysLeft = Math.max(0, Math.floor(left / 86_400_000));
      this.say({ type: "certificate.expiring", dedupe: `certificate.expiring:${c.id}:${day}`, data: { names: c.names, not_after: c.not_after, days_left: daysLeft } });
      if (c.last_error) {
        this.say({
          type: "alert.certificate_renewal_failing",
          dedupe: `alert.certificate_renewal_failing:${c.id}:${day}`,
          data: {
            message: `the certificate for ${c.names[0] ?? c.id} ends in ${daysLeft} days and its renewal failed: ${c.last_error.code}`,
            severity: "critical",
            node: this.opts.node,
            names: c.names,
            not_after: c.not_after,
            code: c.last_error.code,
          },
        });
      }
    }
  }

  private lookAtDescriptors(): void {
    const { open, limit } = this.opts.descriptors?.() ?? { open: descriptorsInUse(), limit: openFileLimit() };
    if (open === undefined || limit === undefined || limit <= 0 || open < limit * DESCRIPTOR_PRESSURE) return;
    if (!this.once("descriptors")) return;
    const percent = Math.round((open / limit) * 100);
    this.say({
      type: "alert.descriptor_pressure",
      data: { message: `open files at ${percent} % of the limit (${open} of ${limit}): raise LimitNOFILE or add a node`, severity: "warning", node: this.opts.node, open, limit },
    });
  }

  private lookAtOutbox(): void {
    const pending = this.opts.pending();
    if (pending <= this.opts.outboxPending || !this.once("outbox")) return;
    this.say({
      type: "alert.outbox_backing_up",
      data: { message: `${pending} webhook deliveries are waiting: a receiver is down or slow (GET /api/webhooks shows which)`, severity: "warning", node: this.opts.node, pending, threshold: this.opts.outboxPending },
    });
  }

  /** The --alert-webhook row's URL and secret, kept for when the database cannot be read. */
  private async keepFlagRow(): Promise<void> {
    const row = await this.core.webhooks.flagRow();
    this.flagRow = row && row.enabled ? { url: row.url, secret: row.secret } : undefined;
  }

  private databaseUnavailable(): void {
    const now = Date.now();
    if (!this.outage || now - this.outage.lastSeen > OUTAGE_OVER_MS) this.outage = { since: now, lastSeen: now, lastSaid: 0 };
    this.outage.lastSeen = now;
    if (now - this.outage.lastSaid < UNAVAILABLE_REPEAT_MS || !this.flagRow) return;
    this.outage.lastSaid = now;
    const since = new Date(this.outage.since).toISOString();
    const id = `evt_db_${this.opts.node}_${this.outage.since}_${now}`;
    const body = JSON.stringify({
      id,
      type: "alert.database_unavailable",
      timestamp: new Date(now).toISOString(),
      data: { message: `the database is unavailable since ${since}: tunnels up keep serving, admin writes and handshakes are refused`, severity: "critical", node: this.opts.node, since },
    });
    const { url, secret } = this.flagRow;
    void postSigned(url, body, signedHeaders([secret], id, Math.floor(now / 1000), body), this.opts.post).then((r) => {
      if (!r.ok) log.warn("database alert not delivered", { error: r.error ?? "failed" });
    });
  }
}
