/**
 * The certificates burrow got by ACME, on disk and in memory.
 *
 * On disk, under `<dataDir>/acme/certs/` (0700): `<id>.pem` (the chain, leaf
 * first) and `<id>.key` (its private key), both 0600, each written whole
 * (tls/private-files.ts). A certificate's id is its first name, with a leading
 * `*.` written `_wildcard.` in file names (`_` is never in a tunnel name, so
 * no real name collides with it). The key is written before the chain: a
 * crash between the two leaves a pair whose key does not match, which
 * `loadAll` reports as that certificate's last error and the renewal
 * schedule replaces, rather than a chain served with the wrong key.
 *
 * In memory: every certificate with its names, so `pick` finds the one for
 * a TLS server name (an exact name first, then a wildcard over one label);
 * and, per certificate, the last failure and next renewal that renewal.ts
 * records, which `state()` reports for the admin API. `onChange` listeners
 * hear of each new certificate, so TLS can swap it in without a restart.
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { systemClock, type Clock } from "../core/clock.ts";
import { log } from "../log.ts";
import { acmeDir } from "./account.ts";
import { readCertificate, type CertificateInfo } from "../tls/certificate-info.ts";
import { chooseCertificate } from "../tls/sni.ts";
import { failureOf, type AcmeFailure, type AcmeResult } from "./errors.ts";
import { ensurePrivateDir, writePrivateFile } from "../tls/private-files.ts";

export const CERTS_SUBDIR = "certs";
const CHAIN_EXT = ".pem";
const KEY_EXT = ".key";
const WILDCARD_FILE_PREFIX = "_wildcard.";

/** A host name, or a wildcard over one: what may name a certificate (and so a file). */
const CERT_NAME = /^(\*\.)?([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?\.)*[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;

export interface StoredCertificate extends CertificateInfo {
  /** The certificate's first name: how it is stored and scheduled. */
  id: string;
  certPem: string;
  keyPem: string;
}

/** One certificate as the admin API shows it. */
export interface CertificateState {
  id: string;
  names: string[];
  issuer: string | null;
  not_before: string | null;
  not_after: string | null;
  last_error: AcmeFailure | null;
  next_renewal: string | null;
}

export interface RenewalStatus {
  /** The names asked for (before any certificate exists, the only record of them). */
  names: string[];
  lastError: AcmeFailure | null;
  nextRenewal: Date | null;
}

export const isCertName = (name: string) => name.length <= 253 && CERT_NAME.test(name);

export const fileStem = (id: string) => (id.startsWith("*.") ? WILDCARD_FILE_PREFIX + id.slice(2) : id);
const idOfStem = (stem: string) => (stem.startsWith(WILDCARD_FILE_PREFIX) ? "*." + stem.slice(WILDCARD_FILE_PREFIX.length) : stem);

export class CertificateStore {
  readonly dir: string;
  private readonly certs = new Map<string, StoredCertificate>();
  private readonly status = new Map<string, RenewalStatus>();
  private readonly listeners = new Set<(cert: StoredCertificate) => void>();

  constructor(
    dataDir: string,
    private readonly clock: Clock = systemClock,
  ) {
    this.dir = join(acmeDir(dataDir), CERTS_SUBDIR);
  }

  /**
   * Reads every certificate in the directory (creating it, 0700, if need
   * be). A pair that cannot be used is skipped and its failure recorded as
   * that id's last error; the failures are returned too, for the log.
   */
  loadAll(): AcmeFailure[] {
    const failures: AcmeFailure[] = [];
    try {
      ensurePrivateDir(this.dir);
    } catch (err) {
      return [failureOf(err, "STORAGE_FAILED", this.clock.now())];
    }
    for (const file of readdirSync(this.dir)) {
      if (!file.endsWith(CHAIN_EXT)) continue;
      const id = idOfStem(file.slice(0, -CHAIN_EXT.length));
      if (!isCertName(id)) continue;
      const keyPath = join(this.dir, fileStem(id) + KEY_EXT);
      try {
        if (!existsSync(keyPath)) throw new Error(`${keyPath} is missing`);
        this.remember(id, readFileSync(join(this.dir, file), "utf8"), readFileSync(keyPath, "utf8"));
      } catch (err) {
        const failure = failureOf(err, "INVALID_CERTIFICATE", this.clock.now());
        failure.message = `${file}: ${failure.message}`;
        failures.push(failure);
        this.setStatus(id, { names: [id], lastError: failure });
      }
    }
    return failures;
  }

  /** Checks the pair, writes it (key first), and serves it from now on. */
  save(id: string, certPem: string, keyPem: string): AcmeResult<StoredCertificate> {
    if (!isCertName(id)) return { ok: false, error: failureOf(new Error(`not a certificate name: ${JSON.stringify(id)}`), "INVALID_CERTIFICATE", this.clock.now()) };
    let info: CertificateInfo;
    try {
      info = readCertificate(certPem, keyPem);
    } catch (err) {
      return { ok: false, error: failureOf(err, "INVALID_CERTIFICATE", this.clock.now()) };
    }
    try {
      ensurePrivateDir(this.dir);
      writePrivateFile(join(this.dir, fileStem(id) + KEY_EXT), keyPem);
      writePrivateFile(join(this.dir, fileStem(id) + CHAIN_EXT), certPem);
    } catch (err) {
      return { ok: false, error: failureOf(err, "STORAGE_FAILED", this.clock.now()) };
    }
    const cert: StoredCertificate = { ...info, id, certPem, keyPem };
    this.certs.set(id, cert);
    for (const listener of this.listeners) {
      try {
        listener(cert);
      } catch (err) {
        // the certificate is stored either way; a listener that failed to swap it in says so itself next time
        log.error("certificate listener failed", { cert: id, err });
      }
    }
    return { ok: true, value: cert };
  }

  get(id: string): StoredCertificate | undefined {
    return this.certs.get(id);
  }

  all(): StoredCertificate[] {
    return [...this.certs.values()];
  }

  /** The certificate to present for a TLS server name (SNI), as tls/sni.ts chooses among those held. */
  pick(serverName: string): StoredCertificate | undefined {
    return chooseCertificate(this.certs.values(), serverName, this.clock.now().getTime());
  }

  /** Records what renewal.ts learned about a certificate (fields not given are kept). */
  setStatus(id: string, update: Partial<RenewalStatus>): void {
    const current = this.status.get(id) ?? { names: this.certs.get(id)?.names ?? [id], lastError: null, nextRenewal: null };
    this.status.set(id, { ...current, ...update });
  }

  statusOf(id: string): RenewalStatus | undefined {
    return this.status.get(id);
  }

  /** Every certificate held or asked for, for the admin API, by id. */
  state(): CertificateState[] {
    const ids = [...new Set([...this.certs.keys(), ...this.status.keys()])].sort();
    return ids.map((id) => {
      const cert = this.certs.get(id);
      const status = this.status.get(id);
      return {
        id,
        names: cert?.names ?? status?.names ?? [id],
        issuer: cert?.issuer ?? null,
        not_before: cert?.notBefore.toISOString() ?? null,
        not_after: cert?.notAfter.toISOString() ?? null,
        last_error: status?.lastError ?? null,
        next_renewal: status?.nextRenewal?.toISOString() ?? null,
      };
    });
  }

  /** Calls `listener` with each certificate saved from now on; returns the unsubscribe. */
  onChange(listener: (cert: StoredCertificate) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  private remember(id: string, certPem: string, keyPem: string): void {
    const info = readCertificate(certPem, keyPem);
    this.certs.set(id, { ...info, id, certPem, keyPem });
  }
}
