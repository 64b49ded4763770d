/**
 * One real renewal: Pebble issuing 6-second certificates, the schedule on
 * the real clock and timers, HTTP-01 answered by a real Bun.serve. The
 * first certificate is issued at once and replaced two thirds into its
 * life by a new one, on disk and in what `pick` serves, without a restart.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openAccount, type AcmeAccount } from "../../src/acme/account.ts";
import { CertificateStore, type StoredCertificate } from "../../src/acme/certificate-store.ts";
import { configureAcmeHttp } from "../../src/acme/http-client.ts";
import { answerHttpChallenge, HttpChallengeTokens, http01Solver } from "../../src/acme/http01.ts";
import { obtainCertificate } from "../../src/acme/issuer.ts";
import { RenewalSchedule } from "../../src/acme/renewal.ts";
import { pebbleSkipReason, startPebble, type Pebble } from "../harness/pebble.ts";
import { within } from "../harness/wait.ts";

const skip = pebbleSkipReason();
const VALIDITY_S = 6;

describe.skipIf(!!skip)("a real renewal against Pebble", () => {
  let pebble: Pebble;
  let dataDir: string;
  let web: ReturnType<typeof Bun.serve>;
  let account: AcmeAccount;
  const tokens = new HttpChallengeTokens();

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "burrow-acme-renew-"));
    web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => answerHttpChallenge(tokens, new URL(req.url).pathname) ?? new Response(null, { status: 404 }) });
    pebble = await startPebble({ httpPort: web.port!, certValiditySeconds: VALIDITY_S });
    configureAcmeHttp({ caRootPem: pebble.serverCa, retries: 1, retryDelayMs: 50 });
    const opened = await openAccount({ dataDir, directoryUrl: pebble.directoryUrl, email: "ops@example.com", poll: { minMs: 100, maxMs: 500, attempts: 20 } });
    if (!opened.ok) throw new Error(opened.error.message);
    account = opened.value;
  }, 30_000);

  afterAll(async () => {
    web?.stop(true);
    await pebble?.[Symbol.asyncDispose]();
    configureAcmeHttp();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test(`a ${VALIDITY_S} s certificate is issued, then renewed at two thirds of its life and swapped in`, async () => {
    const store = new CertificateStore(dataDir);
    store.loadAll();
    const saved: StoredCertificate[] = [];
    const twoSaved = Promise.withResolvers<void>();
    store.onChange((cert) => {
      saved.push(cert);
      if (saved.length === 2) twoSaved.resolve();
    });
    const schedule = new RenewalSchedule({
      store,
      issue: (names) => obtainCertificate(account, { names, solvers: [http01Solver(tokens)] }),
      retryMinMs: 500,
    });
    try {
      schedule.manage(["r.burrow.test"]);
      await within(twoSaved.promise, 20_000, "the first certificate and its renewal");
    } finally {
      schedule.stop();
      await schedule.settled();
    }
    const [first, second] = saved as [StoredCertificate, StoredCertificate];
    expect(first.notAfter.getTime() - first.notBefore.getTime()).toBeLessThanOrEqual(VALIDITY_S * 1000);
    expect(second.fingerprint).not.toBe(first.fingerprint);
    expect(second.keyPem).not.toBe(first.keyPem);
    // renewed two thirds into the first one's life (with what issuance takes), well before it ended
    const renewAt = first.notBefore.getTime() + ((first.notAfter.getTime() - first.notBefore.getTime()) * 2) / 3;
    expect(second.notBefore.getTime()).toBeGreaterThanOrEqual(Math.floor(renewAt / 1000) * 1000 - 1000);
    expect(second.notBefore.getTime()).toBeLessThan(first.notAfter.getTime());

    expect(store.pick("r.burrow.test")?.fingerprint).toBe(second.fingerprint);
    const reloaded = new CertificateStore(dataDir);
    reloaded.loadAll();
    expect(reloaded.get("r.burrow.test")?.fingerprint).toBe(second.fingerprint);
    expect(store.state()[0]).toMatchObject({ id: "r.burrow.test", last_error: null });
  }, 30_000);
});
