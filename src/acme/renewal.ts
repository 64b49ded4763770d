/**
 * Keeps each managed certificate current: gets it when there is none (or
 * the one on disk lacks a name now asked for), renews it two thirds into its
 * lifetime, and after a failure tries again with exponential backoff
 * (RETRY_MIN_MS doubling up to RETRY_MAX_MS, or later if the CA's
 * Retry-After says so), for as long as it is managed. The serving
 * certificate is replaced only by a new one that was stored whole
 * (certificate-store.ts), so a failed renewal leaves the old one in use
 * until it expires, its last_error and next_renewal shown meanwhile.
 *
 * Time comes from a Clock and timers from a Timers, so tests drive it with
 * a fake clock. A wait longer than MAX_TIMER_STEP_MS is taken in steps that
 * each re-read the clock: setTimeout cannot wait more than 24.8 days (2^31
 * ms; Let's Encrypt renews at day 60), and a machine that slept or had its
 * clock set meanwhile is caught up at the next step.
 */
import { systemClock, type Clock } from "../core/clock.ts";
import { log } from "../log.ts";
import { renewalTime } from "../tls/certificate-info.ts";
import type { CertificateStore, StoredCertificate } from "./certificate-store.ts";
import { failureOf, type AcmeFailure, type AcmeResult } from "./errors.ts";
import type { IssuedCertificate } from "./issuer.ts";

/** The first retry after a failure; each further one waits twice as long... */
export const RETRY_MIN_MS = 60 * 1000;
/**
 * ...up to this. An hour keeps a broken setup well under Let's Encrypt's
 * failed-validation limit (5 per name per hour) while still noticing within
 * the hour that the operator fixed it.
 */
export const RETRY_MAX_MS = 60 * 60 * 1000;
/** The longest single timer; longer waits re-check the clock after each step. */
export const MAX_TIMER_STEP_MS = 6 * 60 * 60 * 1000;

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const systemTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export interface RenewalOptions {
  store: CertificateStore;
  /** Gets a certificate for these names (issuer.ts's obtainCertificate with the account and solvers bound). */
  issue(names: string[]): Promise<AcmeResult<IssuedCertificate>>;
  clock?: Clock;
  timers?: Timers;
  retryMinMs?: number;
  retryMaxMs?: number;
  /** Told how each attempt ended (the certificate.issued and certificate.failed events). */
  onResult?: (result: CertificateResult) => void;
}

/** An attempt's end: the names, and the new certificate's end, or the failure with the end of the one still in use (null: none). */
export type CertificateResult = { names: string[]; ok: true; notAfter: Date } | { names: string[]; ok: false; code: string; message: string; notAfter: Date | null };

interface Managed {
  id: string;
  names: string[];
  /** Failures in a row since the last certificate. */
  failures: number;
  lastFailure: AcmeFailure | null;
  /** When this schedule last stored a certificate for it. */
  lastSuccess: Date | null;
  timer: unknown;
  due: Date | null;
}

/** The wait before the next try after `failures` failures in a row (1 or more). */
export function retryDelay(failures: number, minMs = RETRY_MIN_MS, maxMs = RETRY_MAX_MS): number {
  return Math.min(maxMs, minMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
}

export class RenewalSchedule {
  private readonly managed = new Map<string, Managed>();
  /** id -> its attempt running now (one at a time per id, whatever asked for it). */
  private readonly inFlight = new Map<string, Promise<AcmeResult<StoredCertificate>>>();
  private readonly clock: Clock;
  private readonly timers: Timers;
  private stopped = false;

  constructor(private readonly opts: RenewalOptions) {
    this.clock = opts.clock ?? systemClock;
    this.timers = opts.timers ?? systemTimers;
  }

  /**
   * Keeps a certificate for `names` (its id is the first) from now on. The
   * same id with other names gets a new certificate at once; the same names
   * again change nothing.
   */
  manage(names: string[]): void {
    const [id] = names;
    if (id === undefined || this.stopped) return;
    const current = this.managed.get(id);
    if (current && sameNames(current.names, names)) return;
    if (current) this.timers.clear(current.timer);
    const entry: Managed = { id, names: [...names], failures: 0, lastFailure: null, lastSuccess: null, timer: undefined, due: null };
    this.managed.set(id, entry);
    this.opts.store.setStatus(id, { names: entry.names });
    // an attempt in flight schedules the new entry when it ends
    if (!this.inFlight.has(id)) this.schedule(entry);
  }

  /** Stops renewing `id` (its certificate stays on disk and in the store). */
  unmanage(id: string): void {
    const entry = this.managed.get(id);
    if (!entry) return;
    this.timers.clear(entry.timer);
    this.managed.delete(id);
  }

  /** When `id` is next tried, if managed. */
  nextAttempt(id: string): Date | null {
    return this.managed.get(id)?.due ?? null;
  }

  /** Tries `id` now, whatever its schedule (an admin's "retry now"); joins an attempt already running. */
  renewNow(id: string): Promise<AcmeResult<StoredCertificate>> | undefined {
    const entry = this.managed.get(id);
    if (!entry || this.stopped) return undefined;
    this.timers.clear(entry.timer);
    return this.run(entry);
  }

  /** Attempts running now, settled (tests, shutdown). */
  async settled(): Promise<void> {
    await Promise.all(this.inFlight.values());
  }

  /** Clears every timer; attempts running finish but schedule nothing more. */
  stop(): void {
    this.stopped = true;
    for (const entry of this.managed.values()) this.timers.clear(entry.timer);
  }

  private schedule(entry: Managed): void {
    if (this.stopped || this.managed.get(entry.id) !== entry) return;
    const now = this.clock.now();
    const cert = this.opts.store.get(entry.id);
    let due: Date;
    if (entry.failures > 0 && entry.lastFailure) {
      const backoff = new Date(Date.parse(entry.lastFailure.at) + retryDelay(entry.failures, this.opts.retryMinMs, this.opts.retryMaxMs));
      const asked = entry.lastFailure.retryAfter ? new Date(entry.lastFailure.retryAfter) : backoff;
      due = asked > backoff ? asked : backoff;
    } else if (cert && entry.names.every((n) => cert.names.includes(n))) {
      due = renewalTime(cert);
      // a certificate that is due again at once (a very short lifetime, a skewed clock) must not make a loop of issuances
      const earliest = entry.lastSuccess && new Date(entry.lastSuccess.getTime() + (this.opts.retryMinMs ?? RETRY_MIN_MS));
      if (earliest && due < earliest) due = earliest;
    } else {
      due = now;
    }
    entry.due = due;
    this.opts.store.setStatus(entry.id, { nextRenewal: due });
    this.arm(entry, due);
  }

  private arm(entry: Managed, due: Date): void {
    const wait = due.getTime() - this.clock.now().getTime();
    if (wait <= 0) {
      void this.run(entry);
      return;
    }
    entry.timer = this.timers.set(() => {
      if (this.stopped || this.managed.get(entry.id) !== entry) return;
      this.arm(entry, due);
    }, Math.min(wait, MAX_TIMER_STEP_MS));
  }

  private run(entry: Managed): Promise<AcmeResult<StoredCertificate>> {
    const running = this.inFlight.get(entry.id);
    if (running) return running;
    const attempt = this.attempt(entry).finally(() => {
      this.inFlight.delete(entry.id);
      const current = this.managed.get(entry.id);
      if (current) this.schedule(current);
    });
    this.inFlight.set(entry.id, attempt);
    return attempt;
  }

  private async attempt(entry: Managed): Promise<AcmeResult<StoredCertificate>> {
    const names = entry.names;
    let result: AcmeResult<StoredCertificate>;
    try {
      const issued = await this.opts.issue(names);
      result = issued.ok ? this.opts.store.save(entry.id, issued.value.certPem, issued.value.keyPem) : issued;
    } catch (err) {
      // issue() returns its failures; this is a bug's, kept from stopping the schedule
      result = { ok: false, error: failureOf(err, "CA_ERROR", this.clock.now()) };
    }
    // counted against this entry only: one that replaced it meanwhile (other names) starts afresh
    const current = this.managed.get(entry.id) === entry ? entry : { failures: 0, lastFailure: null, lastSuccess: null };
    if (result.ok) {
      current.failures = 0;
      current.lastFailure = null;
      current.lastSuccess = this.clock.now();
      this.opts.store.setStatus(entry.id, { lastError: null });
      log.info("acme certificate stored", { cert: entry.id, names: result.value.names.join(","), not_after: result.value.notAfter.toISOString() });
      this.opts.onResult?.({ names: result.value.names, ok: true, notAfter: result.value.notAfter });
    } else {
      current.failures++;
      current.lastFailure = result.error;
      this.opts.store.setStatus(entry.id, { lastError: result.error });
      log.warn("acme certificate not obtained", { cert: entry.id, code: result.error.code, err: result.error.message, failures: current.failures });
      this.opts.onResult?.({ names, ok: false, code: result.error.code, message: result.error.message, notAfter: this.opts.store.get(entry.id)?.notAfter ?? null });
    }
    return result;
  }
}

const sameNames = (a: string[], b: string[]) => a.length === b.length && a.every((n, i) => n === b[i]);
