/** The ACME flags as `burrow server` reads them: defaults, precedence of certificate files, and mistakes. */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseServerConfig } from "../../src/config/server.ts";

const dir = mkdtempSync(join(tmpdir(), "burrow acme flags "));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string) => {
  const path = join(dir, name);
  writeFileSync(path, "x");
  return path;
};
const parse = (...argv: string[]) => {
  const r = parseServerConfig(argv, {});
  if (r.help) throw new Error("help");
  return r.config;
};

test("without --acme-email there is no ACME", () => {
  expect(parse().acme).toBeUndefined();
});

test("--acme-email alone: Let's Encrypt, HTTPS on 443, DNS on 53, 20 names a week, 60 s first retry", () => {
  expect(parse("--domain", "tunnels.example.com", "--acme-email", "ops@example.com").acme).toEqual({
    email: "ops@example.com",
    directoryUrl: "https://acme-v02.api.letsencrypt.org/directory",
    caRootFile: undefined,
    httpsPort: 443,
    dnsPort: 53,
    namesPerWeek: 20,
    retryMinMs: 60_000,
    dnsRate: { perClient: 10, total: 500 },
    challenge: "http-01",
  });
});

test("--acme-challenge tls-alpn-01: single names prove themselves on the HTTPS port", () => {
  expect(parse("--acme-email", "a@b.co", "--acme-challenge", "tls-alpn-01")!.acme!.challenge).toBe("tls-alpn-01");
});

test("--dns-port off: no wildcard; the rest as given", () => {
  const acme = parse("--acme-email", "a@b.co", "--dns-port", "off", "--https-port", "8443", "--acme-names-per-week", "3", "--acme-ca-root", file("ca.pem"))!.acme!;
  expect(acme.dnsPort).toBeUndefined();
  expect(acme.httpsPort).toBe(8443);
  expect(acme.namesPerWeek).toBe(3);
  expect(acme.caRootFile).toBe(join(dir, "ca.pem"));
});

test("certificate files win over --acme-email, and the server is told so", () => {
  const config = parse("--acme-email", "a@b.co", "--tls-cert", file("c.pem"), "--tls-key", file("k.pem"));
  expect(config.acme).toBeUndefined();
  expect(config.acmeIgnored).toBe(true);
  expect(config.tls).toEqual({ cert: join(dir, "c.pem"), key: join(dir, "k.pem") });
});

test.each([
  [["--acme-email", "not-an-address"], /--acme-email must be an email address/],
  [["--acme-email", "a@b.co", "--https-port", "8080"], /--https-port and --http-port must differ/],
  [["--acme-email", "a@b.co", "--dns-port", "dns"], /--dns-port must be a port number/],
  [["--acme-email", "a@b.co", "--acme-ca-root", "/nonexistent/ca.pem"], /--acme-ca-root: no such file/],
  [["--acme-email", "a@b.co", "--acme-directory", "ftp://x"], /--acme-directory must be an http\(s\) URL/],
  [["--acme-names-per-week", "0"], /--acme-names-per-week must be a positive whole number/],
  [["--dns-rate", "0"], /--dns-rate must be a positive whole number/],
  [["--acme-email", "a@b.co", "--acme-challenge", "dns-01"], /--acme-challenge must be http-01 or tls-alpn-01/],
])("%p is a usage error", (argv, message) => {
  expect(() => parse(...argv)).toThrow(message);
});
