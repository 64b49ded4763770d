/**
 * Words for the HTTPS page, as pure functions of the report and the time:
 * how certificates are had, and how close each one is to expiring.
 */
import type { CertificateReport } from "./api.ts";
import { parseUtc } from "../../../ui/format.ts";

/** Under this many days before expiry a certificate shows in the warning colour. */
export const EXPIRY_WARNING_DAYS = 14;
const DAY_MS = 86_400_000;

/** The sentence at the top of the page. */
export function modeSentence(report: Pick<CertificateReport, "mode" | "directory">): string {
  switch (report.mode) {
    case "acme":
      return `Certificates from ${report.directory || "the ACME CA"}, renewed automatically.`;
    case "files":
      return "From files given at start: renew them yourself and restart.";
    case "off":
      return "No HTTPS on the public port: a proxy in front terminates TLS, or none.";
  }
}

export interface Expiry {
  tone: "ok" | "warn" | "bad" | "muted";
  text: string;
}

const days = (n: number) => `${n} day${n === 1 ? "" : "s"}`;

/** "expires in 40 days" (ok), "expires in 9 days" (warn), "expired 2 days ago" (bad). */
export function expiry(notAfter: string | null, now = Date.now()): Expiry {
  if (notAfter === null) return { tone: "muted", text: "no certificate yet" };
  const left = parseUtc(notAfter).getTime() - now;
  if (Number.isNaN(left)) return { tone: "muted", text: "unknown expiry" };
  if (left <= 0) {
    const past = Math.floor(-left / DAY_MS);
    return { tone: "bad", text: past === 0 ? "expired today" : `expired ${days(past)} ago` };
  }
  const whole = Math.floor(left / DAY_MS);
  const text = whole === 0 ? "expires in less than a day" : `expires in ${days(whole)}`;
  return { tone: left < EXPIRY_WARNING_DAYS * DAY_MS ? "warn" : "ok", text };
}

/** "in 3 days", "in 5 h", "due now": for the next renewal and a CA's retry-after. */
export function until(s: string, now = Date.now()): string {
  const left = parseUtc(s).getTime() - now;
  if (Number.isNaN(left)) return "";
  if (left <= 0) return "due now";
  if (left < 3_600_000) return `in ${Math.max(1, Math.round(left / 60_000))} min`;
  if (left < DAY_MS) return `in ${Math.floor(left / 3_600_000)} h`;
  return `in ${days(Math.floor(left / DAY_MS))}`;
}

export const isWildcard = (name: string) => name.startsWith("*.");
