/**
 * Test certificates made in-process (WebCrypto + @peculiar/x509): a
 * self-signed one for given DNS names and IP addresses, with chosen
 * validity, and its PKCS#8 key. For the ACME test CA's HTTPS endpoint and
 * for the certificate store's tests, which need exact names and dates.
 */
import * as x509 from "@peculiar/x509";

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const DAY_MS = 24 * 60 * 60 * 1000;

export interface TestCertificate {
  certPem: string;
  keyPem: string;
}

export interface TestCertificateOptions {
  names?: string[];
  ips?: string[];
  notBefore?: Date;
  notAfter?: Date;
  /** The issuer/subject common name. */
  commonName?: string;
  /** Adds the CA flag, so the certificate can be a trust anchor as well as a server's. */
  ca?: boolean;
}

let serial = 1;

export async function selfSignedCertificate(opts: TestCertificateOptions = {}): Promise<TestCertificate> {
  const keys = (await crypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
  const names = opts.names ?? [];
  const ips = opts.ips ?? [];
  const extensions: x509.Extension[] = [
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature | (opts.ca ? x509.KeyUsageFlags.keyCertSign : 0), true),
    new x509.BasicConstraintsExtension(opts.ca ?? false, undefined, true),
    new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
  ];
  if (names.length + ips.length > 0) {
    extensions.push(new x509.SubjectAlternativeNameExtension([...names.map((value) => ({ type: "dns" as const, value })), ...ips.map((value) => ({ type: "ip" as const, value }))]));
  }
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: (serial++).toString(16).padStart(2, "0"),
    name: `CN=${opts.commonName ?? names[0] ?? ips[0] ?? "burrow test"}`,
    notBefore: opts.notBefore ?? new Date(Date.now() - 60_000),
    notAfter: opts.notAfter ?? new Date(Date.now() + DAY_MS),
    keys,
    signingAlgorithm: ALG,
    extensions,
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return { certPem: cert.toString("pem") + "\n", keyPem: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") + "\n" };
}
