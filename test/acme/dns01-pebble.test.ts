/**
 * DNS-01 end to end with burrow's own pieces: Pebble resolves through
 * burrow's DNS responder (dns/responder.ts) for `_acme-challenge.burrow.test`,
 * the solver puts the values in ChallengeRecords, and one certificate for
 * both `burrow.test` and `*.burrow.test` is issued: two values under one
 * TXT name at once, withdrawn afterwards.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openAccount, type AcmeAccount } from "../../src/acme/account.ts";
import { splitChain } from "../../src/tls/certificate-info.ts";
import { ChallengeRecords } from "../../src/dns/challenge-records.ts";
import { dns01Solver } from "../../src/acme/dns01.ts";
import { startDnsResponder, type DnsResponder } from "../../src/dns/responder.ts";
import { configureAcmeHttp } from "../../src/acme/http-client.ts";
import { HttpChallengeTokens, http01Solver } from "../../src/acme/http01.ts";
import { obtainCertificate } from "../../src/acme/issuer.ts";
import { pebbleSkipReason, startPebble, type Pebble } from "../harness/pebble.ts";
import { within } from "../harness/wait.ts";

const skip = pebbleSkipReason();

describe.skipIf(!!skip)("DNS-01 through burrow's DNS responder", () => {
  let pebble: Pebble;
  let responder: DnsResponder;
  let dataDir: string;
  let account: AcmeAccount;
  const records = new ChallengeRecords();
  const published: string[] = [];

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "burrow-acme-dns01-"));
    responder = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: "_acme-challenge.burrow.test", records, log: () => {} });
    // nothing listens for HTTP-01 here: every name must be proven through DNS
    pebble = await startPebble({ httpPort: 9, dnsServer: `127.0.0.1:${responder.udpPort}` });
    configureAcmeHttp({ caRootPem: pebble.serverCa, retries: 1, retryDelayMs: 50 });
    const opened = await openAccount({ dataDir, directoryUrl: pebble.directoryUrl, poll: { minMs: 100, maxMs: 500, attempts: 20 } });
    if (!opened.ok) throw new Error(opened.error.message);
    account = opened.value;
  }, 30_000);

  afterAll(async () => {
    await pebble?.[Symbol.asyncDispose]();
    responder?.stop();
    configureAcmeHttp();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test("one certificate for the domain and its wildcard, both proven by TXT values the responder served", async () => {
    const watched = {
      add: (name: string, value: string) => {
        published.push(name);
        return records.add(name, value);
      },
      remove: (name: string, value: string) => records.remove(name, value),
    };
    // DNS-01 first: a solver list that prefers it proves even the plain name through DNS
    const result = await within(
      obtainCertificate(account, { names: ["burrow.test", "*.burrow.test"], solvers: [dns01Solver(watched), http01Solver(new HttpChallengeTokens())] }),
      20_000,
      "issuance",
    );
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}\n${pebble.logs()}`);
    const leaf = new X509Certificate(splitChain(result.value.certPem)[0]!);
    expect(leaf.subjectAltName?.split(", ").sort()).toEqual(["DNS:*.burrow.test", "DNS:burrow.test"]);
    expect(published).toEqual(["_acme-challenge.burrow.test", "_acme-challenge.burrow.test"]);
    expect(responder.counters.answered).toBeGreaterThanOrEqual(2);
    expect(records.size).toBe(0);
  });

  test("a name outside the responder's zone cannot be proven: CHALLENGE_FAILED, its value withdrawn", async () => {
    const result = await within(obtainCertificate(account, { names: ["elsewhere.test"], solvers: [dns01Solver(records)] }), 20_000, "issuance");
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.error.code).toBe("CHALLENGE_FAILED");
      expect(result.error.message).toContain("elsewhere.test (dns-01)");
    }
    expect(records.size).toBe(0);
  });
});
