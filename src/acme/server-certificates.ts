/**
 * The server's HTTPS with ACME: which certificates it asks for, and the TLS
 * entries the edge presents.
 *
 * - **The wildcard** (`<domain>` and `*.<domain>` in one certificate), by
 *   DNS-01 answered by burrow's own DNS responder on --dns-port, once the
 *   operator delegated `_acme-challenge.<domain>` to the server (one NS
 *   record, see dns/responder.ts). One certificate covers every tunnel.
 * - **Names on demand**, by HTTP-01 on the plain HTTP port: only for names
 *   that are reserved or have a live tunnel (never for a name a visitor
 *   sends), only while no valid certificate covers the name and the
 *   wildcard is off or has failed, and at most ON_DEMAND_PER_WEEK new names
 *   a week, so random-name tunnels cannot use up the CA's limits (Let's
 *   Encrypt: 50 certificates per registered domain a week).
 *
 * Renewal, retries and backoff are renewal.ts's; a certificate stored (new or
 * renewed) changes the entries, and the edge's listeners swap them in
 * without dropping connections.
 */
import { systemClock, type Clock } from "../core/clock.ts";
import { log } from "../log.ts";
import type { TlsEntry, TlsSource } from "../tls/tls-source.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { acmeDir, type AccountOptions } from "./account.ts";
import { validAt } from "../tls/certificate-info.ts";
import { CertificateStore } from "./certificate-store.ts";
import { ChallengeRecords } from "../dns/challenge-records.ts";
import { dns01Solver, DNS01_LABEL } from "./dns01.ts";
import { startDnsResponder, type DnsResponder } from "../dns/responder.ts";
import type { DnsLimits } from "../dns/wire.ts";
import { failureOf } from "./errors.ts";
import { fallbackCertificate } from "../tls/fallback-certificate.ts";
import { answerHttpChallenge, http01Solver, HttpChallengeTokens } from "./http01.ts";
import { accountIssuer } from "./issuer.ts";
import { ensurePrivateDir, writePrivateFile } from "../tls/private-files.ts";
import { RenewalSchedule } from "./renewal.ts";
import type { CertificateReport } from "./report.ts";

/** Where the on-demand count lives, beside the certificates. */
const ON_DEMAND_FILE = "on-demand.json";

/** The on-demand times recorded before (a missing or damaged file counts none). */
function readOnDemand(path: string): number[] {
  try {
    const parsed = JSON.parse(readFileSync(path, "utf8")) as { issued?: unknown };
    return Array.isArray(parsed.issued) ? parsed.issued.filter((t): t is number => typeof t === "number" && Number.isFinite(t)).sort((a, b) => a - b) : [];
  } catch {
    return [];
  }
}

/** The responder's answer rates from the flags: bursts of twice the rate. */
function rateLimits(dns: NonNullable<AcmeSettings["dns"]>): Partial<DnsLimits> {
  return {
    ...(dns.perClientPerSecond ? { perClientPerSecond: dns.perClientPerSecond, perClientBurst: 2 * dns.perClientPerSecond } : {}),
    ...(dns.totalPerSecond ? { totalPerSecond: dns.totalPerSecond, totalBurst: 2 * dns.totalPerSecond } : {}),
  };
}

/** New single-name certificates a week, at most (Let's Encrypt allows 50 per registered domain). */
export const ON_DEMAND_PER_WEEK = 20;
const WEEK_MS = 7 * 24 * 60 * 60 * 1000;

export interface AcmeSettings {
  dataDir: string;
  domain: string;
  email: string;
  directoryUrl: string;
  /** Where the DNS responder listens for the wildcard's DNS-01, and its answer rates; undefined: no wildcard. */
  dns?: { host: string; port: number; perClientPerSecond?: number; totalPerSecond?: number };
  onDemandPerWeek?: number;
  /** renewal.ts's first retry wait and least time between two issuances of one certificate */
  retryMinMs?: number;
  clock?: Clock;
}

export class AcmeCertificates implements TlsSource {
  readonly store: CertificateStore;
  private readonly tokens = new HttpChallengeTokens();
  private readonly records = new ChallengeRecords();
  private readonly schedule: RenewalSchedule;
  private readonly listeners = new Set<() => void>();
  /** When names got certificates on demand in the last week (ms), kept in the data dir across restarts. */
  private readonly onDemandIssued: number[] = [];
  private readonly onDemandFile: string;
  private readonly clock: Clock;
  private dns?: DnsResponder;
  private fallback!: { cert: string; key: string };
  private readonly wildcardId: string;

  private constructor(private readonly settings: AcmeSettings) {
    this.clock = settings.clock ?? systemClock;
    this.store = new CertificateStore(settings.dataDir, this.clock);
    // the wildcard first, so its id (and file) is `*.<domain>`, apart from a certificate for the domain alone
    this.wildcardId = `*.${settings.domain}`;
    this.onDemandFile = join(acmeDir(settings.dataDir), ON_DEMAND_FILE);
    this.onDemandIssued.push(...readOnDemand(this.onDemandFile));
    const account: AccountOptions = { dataDir: settings.dataDir, directoryUrl: settings.directoryUrl, email: settings.email };
    // the wildcard's two names share one TXT name; single names prove themselves over HTTP
    const byDns = accountIssuer(account, [dns01Solver(this.records)], this.clock);
    const byHttp = accountIssuer(account, [http01Solver(this.tokens)], this.clock);
    this.schedule = new RenewalSchedule({
      store: this.store,
      clock: this.clock,
      retryMinMs: settings.retryMinMs,
      issue: (names) => (names.some((n) => n.startsWith("*.")) ? byDns(names) : byHttp(names)),
    });
    this.store.onChange((cert) => {
      log.info("certificate installed", { cert: cert.id, names: cert.names.join(","), not_after: cert.notAfter.toISOString() });
      for (const listener of this.listeners) listener();
    });
  }

  static async start(settings: AcmeSettings): Promise<AcmeCertificates> {
    const self = new AcmeCertificates(settings);
    self.fallback = await fallbackCertificate(settings.domain);
    for (const failure of self.store.loadAll()) log.warn("certificate on disk not usable", { code: failure.code, err: failure.message });
    if (settings.dns) {
      self.dns = await startDnsResponder({
        host: settings.dns.host,
        port: settings.dns.port,
        zone: `${DNS01_LABEL}.${settings.domain}`,
        records: self.records,
        limits: rateLimits(settings.dns),
      });
      log.info("acme dns listening", { zone: `${DNS01_LABEL}.${settings.domain}`, port: self.dns.udpPort });
      self.schedule.manage([`*.${settings.domain}`, settings.domain]);
    }
    // names that had certificates of their own keep being renewed
    for (const cert of self.store.all()) if (cert.id !== self.wildcardId) self.schedule.manage(cert.names);
    // agents connect to the domain itself: without the wildcard it needs a certificate of its own
    if (!settings.dns && !self.store.get(settings.domain)) self.schedule.manage([settings.domain]);
    return self;
  }

  /** The DNS responder's port (tests; 0 is resolved to the port taken). */
  get dnsPort(): number | undefined {
    return this.dns?.udpPort;
  }

  entries(): TlsEntry[] {
    const now = this.clock.now().getTime();
    const valid = this.store.all().filter((c) => validAt(c, now));
    const wildcard = valid.find((c) => c.names.includes(`*.${this.settings.domain}`));
    const first = wildcard ? { cert: wildcard.certPem, key: wildcard.keyPem } : this.fallback;
    const named: TlsEntry[] = [];
    for (const cert of valid) for (const name of cert.names) named.push({ cert: cert.certPem, key: cert.keyPem, serverName: name });
    return [first, ...named];
  }

  primary(): TlsEntry {
    const cert = this.covered(this.settings.domain) ? this.store.pick(this.settings.domain) : undefined;
    return cert ? { cert: cert.certPem, key: cert.keyPem } : this.fallback;
  }

  onChange(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The plain HTTP port's answer to an HTTP-01 validation, if `path` is one in flight. */
  answerChallenge(path: string): Response | undefined {
    return answerHttpChallenge(this.tokens, path);
  }

  /**
   * A name that is reserved or has a live tunnel (`<label>.<domain>`): gets
   * a certificate of its own when nothing valid covers it and the wildcard
   * cannot (off, or failing). Never called for names visitors send.
   */
  want(host: string): void {
    const name = host.toLowerCase();
    if (this.covered(name) || this.schedule.nextAttempt(name) !== null || this.store.statusOf(name)) return;
    // the wildcard covers the domain's names; a custom hostname (not under it) needs its own certificate all the same
    const underDomain = name === this.settings.domain || name.endsWith(`.${this.settings.domain}`);
    if (this.settings.dns && !this.wildcardFailing() && underDomain) return;
    if (name !== this.settings.domain) this.want(this.settings.domain);
    const now = this.clock.now().getTime();
    while (this.onDemandIssued.length > 0 && this.onDemandIssued[0]! <= now - WEEK_MS) this.onDemandIssued.shift();
    const limit = this.settings.onDemandPerWeek ?? ON_DEMAND_PER_WEEK;
    if (this.onDemandIssued.length >= limit) {
      this.store.setStatus(name, {
        names: [name],
        lastError: failureOf(new Error(`${limit} names had certificates made on demand this week (--acme-names-per-week); use the wildcard (--dns-port)`), "RATE_LIMITED", this.clock.now()),
      });
      return;
    }
    this.onDemandIssued.push(now);
    try {
      ensurePrivateDir(acmeDir(this.settings.dataDir));
      writePrivateFile(this.onDemandFile, JSON.stringify({ issued: this.onDemandIssued }) + "\n");
    } catch (err) {
      log.warn("could not record a certificate made on demand", { err: String(err) });
    }
    log.info("certificate wanted", { name });
    this.schedule.manage([name]);
  }

  report(): CertificateReport {
    return { mode: "acme", directory: this.settings.directoryUrl, certificates: this.store.state() };
  }

  stop(): void {
    this.schedule.stop();
    this.dns?.stop();
    this.listeners.clear();
  }

  private covered(name: string): boolean {
    const cert = this.store.pick(name);
    const now = this.clock.now().getTime();
    return cert !== undefined && validAt(cert, now);
  }

  /** The wildcard was asked for and its last attempt failed (e.g. the NS record is not there yet). */
  private wildcardFailing(): boolean {
    return this.store.statusOf(this.wildcardId)?.lastError != null;
  }
}
