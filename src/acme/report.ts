/**
 * What the admin API and panel show of the server's HTTPS
 * (`GET /api/certificates`): how certificates are had, and each one's state.
 *
 * - "acme": burrow gets and renews them itself (--acme-email);
 * - "files": --tls-cert/--tls-key, read at start (renewing them is the operator's);
 * - "off": no TLS on the public port (e.g. behind a proxy that terminates it).
 */
import { readFileSync } from "node:fs";
import { readCertificate } from "../tls/certificate-info.ts";
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

/** The report for --tls-cert: the file's certificate as read at start; a file that does not parse reports its error. */
export function filesReport(certFile: string): CertificateReport {
  try {
    const info = readCertificate(readFileSync(certFile, "utf8"));
    return {
      mode: "files",
      certificates: [
        {
          id: info.names[0] ?? certFile,
          names: info.names,
          issuer: info.issuer,
          not_before: info.notBefore.toISOString(),
          not_after: info.notAfter.toISOString(),
          last_error: null,
          next_renewal: null,
        },
      ],
    };
  } catch (err) {
    const at = new Date().toISOString();
    return { mode: "files", certificates: [{ id: certFile, names: [], issuer: null, not_before: null, not_after: null, last_error: { code: "INVALID_CERTIFICATE", message: (err as Error).message, at }, next_renewal: null }] };
  }
}
