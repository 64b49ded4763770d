/**
 * What the admin API and panel show of the server's HTTPS
 * (`GET /api/certificates`): how certificates are had, and each one's state.
 *
 * - "acme": burrow gets and renews them itself (--acme-email);
 * - "files": --tls-cert/--tls-key, read at start (renewing them is the operator's);
 * - "off": no TLS on the public port (e.g. behind a proxy that terminates it).
 */
import type { CertificateState } from "./certificate-store.ts";

export type CertificateMode = "acme" | "files" | "off";

export interface CertificateReport {
  mode: CertificateMode;
  /** The ACME directory URL, in "acme" mode. */
  directory?: string;
  certificates: CertificateState[];
}

/** Where the admin API reads the report from; the server passes one in. */
export type CertificateReporter = () => CertificateReport;

export const NO_TLS: CertificateReporter = () => ({ mode: "off", certificates: [] });
