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
import type { CertificateResult } from "./renewal.ts";
import { systemClock, type Clock } from "../core/clock.ts";
import { log } from "../log.ts";
import type { TlsEntry, TlsSource } from "../tls/tls-source.ts";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { acmeDir, type AccountOptions } from "./account.ts";
import { readCertificate, renewalTime, validAt } from "../tls/certificate-info.ts";
import { CertificateStore } from "./certificate-store.ts";
import { ChallengeRecords, CHALLENGE_TTL_MS } from "../dns/challenge-records.ts";
import { dns01RecordName, dns01Solver, DNS01_LABEL } from "./dns01.ts";
import { startDnsResponder, type DnsResponder } from "../dns/responder.ts";
import type { DnsLimits } from "../dns/wire.ts";
import { AcmeStepError, failureOf, type AcmeResult } from "./errors.ts";
import { fallbackCertificate } from "../tls/fallback-certificate.ts";
import { answerHttpChallenge, HTTP01_TOKEN_TTL_MS, http01Solver, HttpChallengeTokens } from "./http01.ts";
import { TLS_ALPN_TTL_MS, tlsAlpn01Solver, TlsAlpnAnswers } from "./tls-alpn01.ts";
import type { Passthrough } from "../sockets/tls-visit.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import { accountIssuer, ISSUE_TIMEOUT_MS, type IssuedCertificate } from "./issuer.ts";
import { sharedSolver, type AcmeSharing, type SharedChallenge } from "./shared.ts";
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
  /** Several nodes: the account, certificates, answers and orders shared with the others (acme/shared.ts). */
  sharing?: AcmeSharing;
  /** How single names prove themselves (--acme-challenge): HTTP-01 on port 80 (the default), or TLS-ALPN-01 on the HTTPS port. */
  challenge?: "http-01" | "tls-alpn-01";
  /** Told how each order ended (the certificate events). */
  onResult?: (result: CertificateResult) => void;
}

/** A node's lease on an order: the whole issuance's deadline and a minute more, then another node may order. */
export const ORDER_LEASE_MS = ISSUE_TIMEOUT_MS + 60_000;

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
  /** TLS-ALPN-01 answers in flight (--acme-challenge tls-alpn-01), served on the HTTPS port. */
  private readonly alpn = new TlsAlpnAnswers();
  /** Names whose on-demand count the database is asked about now. */
  private readonly counting = new Set<string>();

  private constructor(private readonly settings: AcmeSettings) {
    this.clock = settings.clock ?? systemClock;
    this.store = new CertificateStore(settings.dataDir, this.clock);
    // the wildcard first, so its id (and file) is `*.<domain>`, apart from a certificate for the domain alone
    this.wildcardId = `*.${settings.domain}`;
    this.onDemandFile = join(acmeDir(settings.dataDir), ON_DEMAND_FILE);
    this.onDemandIssued.push(...readOnDemand(this.onDemandFile));
    const sharing = settings.sharing;
    const account: AccountOptions = {
      dataDir: settings.dataDir,
      directoryUrl: settings.directoryUrl,
      email: settings.email,
      ...(sharing ? { sharedKey: (make: () => Promise<string>) => sharing.accountKey(make) } : {}),
    };
    // the wildcard's two names share one TXT name; single names prove themselves over HTTP (port 80), or TLS-ALPN-01 on the HTTPS port
    let dnsSolver = dns01Solver(this.records);
    let httpSolver = settings.challenge === "tls-alpn-01" ? tlsAlpn01Solver(this.alpn) : http01Solver(this.tokens);
    if (sharing) {
      dnsSolver = sharedSolver(dnsSolver, sharing, (identifier, _token, digest) => ({ type: "dns-01", name: dns01RecordName(identifier), value: digest }), CHALLENGE_TTL_MS);
      httpSolver =
        settings.challenge === "tls-alpn-01"
          ? sharedSolver(httpSolver, sharing, (identifier, _token, keyAuthorization) => ({ type: "tls-alpn-01", name: identifier, value: keyAuthorization }), TLS_ALPN_TTL_MS)
          : sharedSolver(httpSolver, sharing, (_identifier, token, keyAuthorization) => ({ type: "http-01", name: token ?? "", value: keyAuthorization }), HTTP01_TOKEN_TTL_MS);
    }
    const byDns = accountIssuer(account, [dnsSolver], this.clock);
    const byHttp = accountIssuer(account, [httpSolver], this.clock);
    this.schedule = new RenewalSchedule({
      store: this.store,
      clock: this.clock,
      retryMinMs: settings.retryMinMs,
      onResult: settings.onResult,
      issue: (names) => this.orderOnce(names, names.some((n) => n.startsWith("*.")) ? byDns : byHttp),
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
    if (settings.sharing) await self.joinNodes(settings.sharing);
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

  /** The HTTPS port's way to a TLS-ALPN-01 answer for a ClientHello that asks for one in flight (tls-alpn01.ts); undefined for any other. */
  answerTlsAlpn(hello: ClientHello): Passthrough | undefined {
    return this.alpn.route(hello);
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
    const limit = this.settings.onDemandPerWeek ?? ON_DEMAND_PER_WEEK;
    if (this.settings.sharing) {
      this.wantCounted(this.settings.sharing, name, limit);
      return;
    }
    const now = this.clock.now().getTime();
    while (this.onDemandIssued.length > 0 && this.onDemandIssued[0]! <= now - WEEK_MS) this.onDemandIssued.shift();
    if (this.onDemandIssued.length >= limit) {
      this.overLimit(name, limit);
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

  /** Several nodes: the week's count is the cluster's, kept in the database. */
  private wantCounted(sharing: AcmeSharing, name: string, limit: number): void {
    if (this.counting.has(name)) return;
    this.counting.add(name);
    sharing
      .countOnDemand(name, limit)
      .then(
        (counted) => {
          if (!counted) return this.overLimit(name, limit);
          log.info("certificate wanted", { name });
          this.schedule.manage([name]);
        },
        // not counted, not ordered: the name is wanted again when next seen
        (err) => log.warn("certificate on demand not counted", { name, err: String(err) }),
      )
      .finally(() => this.counting.delete(name));
  }

  private overLimit(name: string, limit: number): void {
    this.store.setStatus(name, {
      names: [name],
      lastError: failureOf(new Error(`${limit} names had certificates made on demand this week (--acme-names-per-week); use the wildcard (--dns-port)`), "RATE_LIMITED", this.clock.now()),
    });
  }

  /**
   * Orders `names` with `order`, unless another node can: with several
   * nodes, a certificate stored by another and still short of renewal is
   * taken as it is, and one that another node is ordering now is left to it
   * (ORDERED_ELSEWHERE, retried; its certificate comes with its message).
   */
  private async orderOnce(names: string[], order: (names: string[]) => Promise<AcmeResult<IssuedCertificate>>): Promise<AcmeResult<IssuedCertificate>> {
    const sharing = this.settings.sharing;
    const id = names[0]!;
    if (!sharing) {
      log.info("acme order", { cert: id, names: names.join(",") });
      return order(names);
    }
    try {
      const stored = await this.sharedFresh(sharing, names);
      if (stored) return { ok: true, value: stored };
      if (!(await sharing.lease(id, ORDER_LEASE_MS))) {
        return { ok: false, error: failureOf(new AcmeStepError("ORDERED_ELSEWHERE", `another node is ordering ${id}`), "ORDERED_ELSEWHERE", this.clock.now()) };
      }
    } catch (err) {
      return { ok: false, error: failureOf(err, "STORAGE_FAILED", this.clock.now()) };
    }
    try {
      // a node that finished just before the lease was taken
      const stored = await this.sharedFresh(sharing, names).catch(() => undefined);
      if (stored) return { ok: true, value: stored };
      log.info("acme order", { cert: id, names: names.join(",") });
      const result = await order(names);
      if (result.ok) {
        try {
          const info = readCertificate(result.value.certPem, result.value.keyPem);
          await sharing.putCertificate({ id, certPem: result.value.certPem, keyPem: result.value.keyPem, notAfter: info.notAfter });
        } catch (err) {
          // served here all the same; the other nodes order theirs when the lease ends
          log.warn("certificate not shared with the other nodes", { cert: id, err: String(err) });
        }
      }
      return result;
    } finally {
      await sharing.release(id).catch(() => {});
    }
  }

  /** The database's certificate for these names when it covers them all and is not due for renewal yet. */
  private async sharedFresh(sharing: AcmeSharing, names: string[]): Promise<IssuedCertificate | undefined> {
    const stored = await sharing.certificate(names[0]!);
    if (!stored) return undefined;
    try {
      const info = readCertificate(stored.certPem, stored.keyPem);
      if (!names.every((n) => info.names.includes(n)) || renewalTime(info) <= this.clock.now()) return undefined;
      return { names: info.names, certPem: stored.certPem, keyPem: stored.keyPem };
    } catch {
      return undefined; // a damaged row: ordered anew, and replaced
    }
  }

  /**
   * Several nodes: takes the certificates and the answers in flight that
   * are in the database, shares this node's certificates the database lacks
   * (or holds older ones of), and from now on hears of the others'.
   */
  private async joinNodes(sharing: AcmeSharing): Promise<void> {
    sharing.listen({
      certificate: (id) => void this.takeShared(sharing, id),
      challenge: (challenge, added) => this.serveShared(challenge, added),
    });
    try {
      const stored = await sharing.certificates();
      for (const row of stored) this.takeRow(row.id, row.certPem, row.keyPem);
      for (const cert of this.store.all()) {
        const row = stored.find((r) => r.id === cert.id);
        const rowEnds = row ? readCertificate(row.certPem).notAfter.getTime() : 0;
        if (cert.notAfter.getTime() > rowEnds) await sharing.putCertificate({ id: cert.id, certPem: cert.certPem, keyPem: cert.keyPem, notAfter: cert.notAfter });
      }
      for (const challenge of await sharing.challenges()) await this.serveShared(challenge, true);
    } catch (err) {
      // this node serves what it has; its orders share what they get once the database answers
      log.warn("acme state of the other nodes not read", { err: String(err) });
    }
  }

  private async takeShared(sharing: AcmeSharing, id: string): Promise<void> {
    try {
      const row = await sharing.certificate(id);
      if (row) this.takeRow(row.id, row.certPem, row.keyPem);
    } catch (err) {
      log.warn("certificate of another node not read", { cert: id, err: String(err) });
    }
  }

  /** Serves a certificate from the database unless this node's own ends later. */
  private takeRow(id: string, certPem: string, keyPem: string): void {
    const held = this.store.get(id);
    let notAfter: Date;
    try {
      notAfter = readCertificate(certPem, keyPem).notAfter;
    } catch (err) {
      log.warn("certificate in the database not usable", { cert: id, err: String(err) });
      return;
    }
    if (held && held.notAfter >= notAfter) return;
    const saved = this.store.save(id, certPem, keyPem);
    if (!saved.ok) return log.warn("certificate of another node not stored", { cert: id, code: saved.error.code, err: saved.error.message });
    // what this node last failed at (waiting for the order elsewhere, say) is answered now
    const status = this.store.statusOf(id);
    if (status?.lastError && status.names.every((n) => saved.value.names.includes(n))) this.store.setStatus(id, { lastError: null, nextRenewal: renewalTime(saved.value) });
  }

  private async serveShared(challenge: SharedChallenge, added: boolean): Promise<void> {
    try {
      if (challenge.type === "tls-alpn-01") {
        if (added) await this.alpn.add(challenge.name, challenge.value);
        else this.alpn.remove(challenge.name);
      } else if (challenge.type === "http-01") {
        if (added) this.tokens.add(challenge.name, challenge.value);
        else this.tokens.remove(challenge.name);
      } else if (added) {
        const refusal = this.records.add(challenge.name, challenge.value);
        if (refusal) log.warn("dns-01 answer of another node not served", { name: challenge.name, code: refusal.code, err: refusal.message });
      } else this.records.remove(challenge.name, challenge.value);
    } catch (err) {
      log.warn("challenge answer of another node not served", { type: challenge.type, err: String(err) });
    }
  }

  report(): CertificateReport {
    return { mode: "acme", directory: this.settings.directoryUrl, certificates: this.store.state() };
  }

  stop(): void {
    this.schedule.stop();
    this.alpn.clear();
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
