/**
 * Which certificate a TLS connection gets for the server name it asked for
 * (SNI), whoever holds the certificates (ACME's store now; files given by
 * hand and custom hostnames' certificates use the same rule).
 */
import { nameCovers, validAt, type CertificateInfo } from "./certificate-info.ts";

/**
 * Among the certificates that cover `serverName`: one valid `now` before an
 * expired one, an exact name before a wildcard, then the one that lasts
 * longest. Undefined when none covers it.
 */
export function chooseCertificate<C extends Pick<CertificateInfo, "names" | "notBefore" | "notAfter">>(certs: Iterable<C>, serverName: string, now: number): C | undefined {
  const name = serverName.toLowerCase().replace(/\.$/, "");
  let best: C | undefined;
  let bestRank: number[] = [];
  for (const cert of certs) {
    const exact = cert.names.includes(name);
    if (!exact && !cert.names.some((n) => nameCovers(n, name))) continue;
    const rank = [validAt(cert, now) ? 1 : 0, exact ? 1 : 0, cert.notAfter.getTime()];
    if (!best || compareRanks(rank, bestRank) > 0) {
      best = cert;
      bestRank = rank;
    }
  }
  return best;
}

/** Ranks compared element by element, the first difference deciding. */
function compareRanks(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return (a[i] ?? 0) - (b[i] ?? 0);
  return 0;
}

/**
 * The entry of a TlsSource for the server name a client asked for: the one
 * named exactly, else a wildcard covering it, else the first (which is also
 * what a client that names no server gets). Bun.serve picks the same way
 * among its `tls` array; a front before Bun.listen picks with this.
 */
export function chooseEntry<E extends { serverName?: string }>(entries: readonly E[], serverName: string | undefined): E | undefined {
  if (serverName !== undefined) {
    const name = serverName.toLowerCase().replace(/\.$/, "");
    const named = (covers: (certName: string) => boolean) => entries.find((e) => e.serverName !== undefined && covers(e.serverName.toLowerCase()));
    const found = named((n) => n === name) ?? named((n) => nameCovers(n, name));
    if (found) return found;
  }
  return entries[0];
}
