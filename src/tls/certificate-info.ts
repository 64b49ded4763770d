/**
 * What burrow needs to know of a certificate chain (PEM, leaf first) and its
 * key: the names it covers, who issued it, when it is valid, and that the
 * key is the leaf's. Read with node:crypto's X509Certificate; pure.
 */
import { X509Certificate, createPrivateKey } from "node:crypto";

export interface CertificateInfo {
  /** DNS names of the leaf's subjectAltName, lower case, in its order. */
  names: string[];
  /** The leaf's issuer, as one line ("CN=Pebble Intermediate CA 1a2b3c"). */
  issuer: string;
  notBefore: Date;
  notAfter: Date;
  /** SHA-256 of the leaf, colon-separated hex: tells one issuance from the next. */
  fingerprint: string;
}

const PEM_CERT = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The PEM blocks of a chain, leaf first. */
export function splitChain(pem: string): string[] {
  return pem.match(PEM_CERT) ?? [];
}

/** The DNS names of a subjectAltName as node:crypto renders it ("DNS:a.example, DNS:*.b.example, IP Address:..."). */
export function dnsNamesOf(subjectAltName: string | undefined): string[] {
  if (!subjectAltName) return [];
  return subjectAltName
    .split(/,\s*/)
    .filter((part) => part.startsWith("DNS:"))
    .map((part) => part.slice("DNS:".length).replace(/^"|"$/g, "").toLowerCase());
}

/** Parses the leaf of `chainPem`; with `keyPem`, also checks that it is the leaf's key. Throws a sentence when not usable. */
export function readCertificate(chainPem: string, keyPem?: string): CertificateInfo {
  const [leafPem] = splitChain(chainPem);
  if (!leafPem) throw new Error("no PEM certificate found");
  const leaf = new X509Certificate(leafPem);
  if (keyPem !== undefined && !leaf.checkPrivateKey(createPrivateKey(keyPem))) throw new Error("the private key is not the certificate's");
  const names = dnsNamesOf(leaf.subjectAltName);
  if (names.length === 0) throw new Error("the certificate names no DNS name");
  return {
    names,
    issuer: leaf.issuer.split("\n").join(", "),
    notBefore: new Date(leaf.validFrom),
    notAfter: new Date(leaf.validTo),
    fingerprint: leaf.fingerprint256,
  };
}

/**
 * Whether a certificate name covers a TLS server name: the same name, or a
 * wildcard `*.rest` where the server name is one label followed by `rest`
 * (RFC 6125 6.4.3: the wildcard stands for exactly one whole label).
 */
export function nameCovers(certName: string, serverName: string): boolean {
  const name = serverName.toLowerCase().replace(/\.$/, "");
  if (certName === name) return true;
  if (!certName.startsWith("*.")) return false;
  const dot = name.indexOf(".");
  return dot > 0 && name.slice(dot + 1) === certName.slice(2);
}

/**
 * The moment to renew: two thirds into the certificate's lifetime (day 60
 * of Let's Encrypt's 90), which leaves a third of it for retries.
 */
export function renewalTime(info: Pick<CertificateInfo, "notBefore" | "notAfter">): Date {
  const lifetime = info.notAfter.getTime() - info.notBefore.getTime();
  return new Date(info.notBefore.getTime() + Math.floor((lifetime * 2) / 3));
}

/** Whether a certificate is within its validity at `now` (ms since the epoch). */
export function validAt(info: Pick<CertificateInfo, "notBefore" | "notAfter">, now: number): boolean {
  return info.notBefore.getTime() <= now && now < info.notAfter.getTime();
}
