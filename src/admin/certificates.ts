/**
 * GET /api/certificates (admins only, like every route but login): how the
 * public port gets its certificates and each one's state, as the server's
 * CertificateReporter sees it now. The report is rendered, never changed:
 * in "files" mode as in "acme" mode the server makes it. The API's names are
 * snake_case, so the failure's retryAfter is retry_after here.
 */
import type { CertificateReport, CertificateReporter } from "../acme/report.ts";
import type { Route } from "./context.ts";
import { json } from "../api/http.ts";
import { CertificateReportJson } from "../api/responses.ts";

type Certificate = CertificateReport["certificates"][number];
type Failure = NonNullable<Certificate["last_error"]>;

/** An instant as ISO 8601 UTC with Z; a string that is not a date is passed on as it came. */
function iso(s: string): string;
function iso(s: string | null): string | null;
function iso(s: string | null): string | null {
  if (s === null) return null;
  const d = new Date(s);
  return Number.isNaN(d.getTime()) ? s : d.toISOString();
}

const failureJson = (f: Failure) => ({
  code: f.code,
  message: f.message,
  at: iso(f.at),
  ...(f.retryAfter ? { retry_after: iso(f.retryAfter) } : {}),
});

const certificateJson = (c: Certificate) => ({
  id: c.id,
  names: c.names,
  issuer: c.issuer,
  not_before: iso(c.not_before),
  not_after: iso(c.not_after),
  last_error: c.last_error ? failureJson(c.last_error) : null,
  next_renewal: iso(c.next_renewal),
});

export const certificateReportJson = (r: CertificateReport) => ({
  mode: r.mode,
  ...(r.directory !== undefined ? { directory: r.directory } : {}),
  certificates: r.certificates.map(certificateJson),
});

export function certificateRoutes(report: CertificateReporter): Route[] {
  return [
    {
      path: "/api/certificates",
      methods: {
        GET: () => json(certificateReportJson(report())),
      },
      docs: {
        GET: { summary: "How the public port gets its HTTPS certificates, and each one's state", responses: { 200: { description: "The report", schema: CertificateReportJson } } },
      },
    },
  ];
}
