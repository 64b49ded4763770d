/**
 * The certificate the public port presents before ACME has given it one (the
 * first minutes of a new server, or a name still waiting for its own): made
 * here, self-signed, for the domain and its wildcard, kept in memory only. A
 * browser shows its warning for it, which says more than a refused
 * connection would; the log and GET /api/certificates say why.
 */
import * as x509 from "@peculiar/x509";

const ALG = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
const VALID_MS = 365 * 24 * 60 * 60 * 1000;

export async function fallbackCertificate(domain: string): Promise<{ cert: string; key: string }> {
  const keys = (await crypto.subtle.generateKey(ALG, true, ["sign", "verify"])) as CryptoKeyPair;
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: Buffer.from(crypto.getRandomValues(new Uint8Array(8))).toString("hex"),
    name: `CN=${domain} (burrow: certificate pending)`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + VALID_MS),
    keys,
    signingAlgorithm: ALG,
    extensions: [
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension([
        { type: "dns", value: domain },
        { type: "dns", value: `*.${domain}` },
      ]),
    ],
  });
  const pkcs8 = await crypto.subtle.exportKey("pkcs8", keys.privateKey);
  return { cert: cert.toString("pem") + "\n", key: x509.PemConverter.encode(pkcs8, "PRIVATE KEY") + "\n" };
}
