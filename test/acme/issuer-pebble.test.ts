/**
 * Issuance against a real ACME CA (Pebble): the account, an HTTP-01
 * certificate answered by a real Bun.serve on loopback, the chain checked
 * up to Pebble's root over a real TLS handshake, storage and reload, and
 * every way it fails coming back as a value with its code.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { X509Certificate } from "node:crypto";
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { connect } from "node:tls";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as acme from "acme-client";
import { openAccount, type AcmeAccount } from "../../src/acme/account.ts";
import { splitChain } from "../../src/tls/certificate-info.ts";
import { CertificateStore } from "../../src/acme/certificate-store.ts";
import { dns01Solver } from "../../src/acme/dns01.ts";
import { configureAcmeHttp, readCaRoot } from "../../src/acme/http-client.ts";
import { answerHttpChallenge, HttpChallengeTokens, http01Solver } from "../../src/acme/http01.ts";
import { accountIssuer, obtainCertificate } from "../../src/acme/issuer.ts";
import { RenewalSchedule } from "../../src/acme/renewal.ts";
import { pebbleSkipReason, startPebble, type Pebble } from "../harness/pebble.ts";
import { within } from "../harness/wait.ts";

const skip = pebbleSkipReason();
if (skip) console.warn(`ACME tests against Pebble skipped: ${skip}`);

/** What one test may take against Pebble, which answers in well under a second. */
const ISSUE_MS = 20_000;
const POLL = { minMs: 100, maxMs: 500, attempts: 20 };

describe.skipIf(!!skip)("issuance against Pebble", () => {
  let pebble: Pebble;
  let dataDir: string;
  let challengeServer: ReturnType<typeof Bun.serve>;
  const tokens = new HttpChallengeTokens();
  const challengePaths: string[] = [];
  let account: AcmeAccount;
  /** A data dir of its own, under dataDir, so it goes with it. */
  const scratchDir = () => mkdtempSync(join(dataDir, "scratch-"));

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), "burrow-acme-"));
    // the edge's port-80 side, reduced to what HTTP-01 needs
    challengeServer = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const path = new URL(req.url).pathname;
        challengePaths.push(path);
        return answerHttpChallenge(tokens, path) ?? new Response("not a challenge", { status: 404 });
      },
    });
    pebble = await startPebble({ httpPort: challengeServer.port!, blockedDomains: ["blocked.burrow.test"] });
    // as --acme-ca-root FILE gives it
    writeFileSync(join(dataDir, "ca-root.pem"), pebble.serverCa);
    const caRoot = readCaRoot(join(dataDir, "ca-root.pem"));
    if (!caRoot.ok) throw new Error(caRoot.error.message);
    configureAcmeHttp({ caRootPem: caRoot.value, retries: 1, retryDelayMs: 50 });
    const opened = await openAccount({ dataDir, directoryUrl: pebble.directoryUrl, email: "ops@example.com", poll: POLL });
    if (!opened.ok) throw new Error(`account: ${opened.error.message}`);
    account = opened.value;
  }, 30_000);

  afterAll(async () => {
    challengeServer?.stop(true);
    await pebble?.[Symbol.asyncDispose]();
    configureAcmeHttp();
    if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  });

  test("the account key is 0600 in a 0700 directory, and a second open reuses the cached account URL without a request", async () => {
    expect(statSync(join(dataDir, "acme")).mode & 0o777).toBe(0o700);
    expect(statSync(join(dataDir, "acme", "account.key")).mode & 0o777).toBe(0o600);
    expect(account.url).toStartWith("https://127.0.0.1:");
    let requests = 0;
    const id = acme.axios.interceptors.request.use((config) => {
      requests++;
      return config;
    });
    try {
      const again = await openAccount({ dataDir, directoryUrl: pebble.directoryUrl, email: "ops@example.com" });
      expect(again.ok && again.value.url).toBe(account.url);
      expect(requests).toBe(0);
      // another email: one registration call, which finds the same account (same key) and updates its contact
      const changed = await openAccount({ dataDir, directoryUrl: pebble.directoryUrl, email: "other@example.com" });
      expect(changed.ok && changed.value.url).toBe(account.url);
      expect(requests).toBeGreaterThan(0);
    } finally {
      acme.axios.interceptors.request.eject(id);
    }
  });

  test("a certificate for a.burrow.test by HTTP-01, answered by a real Bun.serve, chains to Pebble's root over TLS", async () => {
    const result = await within(obtainCertificate(account, { names: ["a.burrow.test"], solvers: [http01Solver(tokens)] }), ISSUE_MS, "issuance");
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}\n${pebble.logs()}`);
    const { certPem, keyPem } = result.value;

    // Pebble fetched the token through the Bun.serve, and the token is gone once settled
    expect(challengePaths.some((p) => p.startsWith("/.well-known/acme-challenge/"))).toBe(true);
    expect(tokens.size).toBe(0);

    const [leafPem, intermediatePem] = splitChain(certPem);
    const leaf = new X509Certificate(leafPem!);
    expect(leaf.subjectAltName).toContain("DNS:a.burrow.test");
    expect(leaf.verify(new X509Certificate(intermediatePem!).publicKey)).toBe(true);
    expect(new X509Certificate(pebble.intermediatePem).fingerprint256).toBe(new X509Certificate(intermediatePem!).fingerprint256);

    // a TLS server presenting it is trusted by a client that trusts only Pebble's root
    await using tlsServer = tlsServe(certPem, keyPem);
    const authorized = await handshake(tlsServer.port, "a.burrow.test", pebble.rootPem);
    expect(authorized).toBe(true);
  });

  test("a stored certificate is 0600 on disk and a new store loads it back and picks it", async () => {
    const result = await within(obtainCertificate(account, { names: ["b.burrow.test", "c.burrow.test"], solvers: [http01Solver(tokens)] }), ISSUE_MS, "issuance");
    if (!result.ok) throw new Error(result.error.message);
    const store = new CertificateStore(dataDir);
    const saved = store.save("b.burrow.test", result.value.certPem, result.value.keyPem);
    if (!saved.ok) throw new Error(saved.error.message);
    const certs = join(dataDir, "acme", "certs");
    expect(statSync(certs).mode & 0o777).toBe(0o700);
    expect(statSync(join(certs, "b.burrow.test.pem")).mode & 0o777).toBe(0o600);
    expect(statSync(join(certs, "b.burrow.test.key")).mode & 0o777).toBe(0o600);

    const reloaded = new CertificateStore(dataDir);
    expect(reloaded.loadAll()).toEqual([]);
    const cert = reloaded.pick("C.burrow.test");
    expect(cert?.id).toBe("b.burrow.test");
    expect(cert?.fingerprint).toBe(saved.value.fingerprint);
    expect(cert?.names).toEqual(["b.burrow.test", "c.burrow.test"]);
    expect(cert?.issuer).toContain("Pebble Intermediate CA");
    const [state] = reloaded.state();
    expect(state).toMatchObject({ id: "b.burrow.test", names: ["b.burrow.test", "c.burrow.test"], last_error: null });
    expect(Date.parse(state!.not_after!)).toBeGreaterThan(Date.now());
  });

  test("a wildcard certificate by DNS-01, its TXT value served by pebble-challtestsrv", async () => {
    const cts = pebble.challtestsrv!;
    const publisher = {
      add: async (name: string, value: string) => (await cts.setTxt(name, value), undefined),
      remove: (name: string) => cts.clearTxt(name),
    };
    const result = await within(obtainCertificate(account, { names: ["*.w.burrow.test"], solvers: [http01Solver(tokens), dns01Solver(publisher)] }), ISSUE_MS, "issuance");
    if (!result.ok) throw new Error(`${result.error.code}: ${result.error.message}`);
    expect(new X509Certificate(splitChain(result.value.certPem)[0]!).subjectAltName).toBe("DNS:*.w.burrow.test");
  });

  test("an issuer bound to account options opens the account once, and again only after it failed to", async () => {
    const dir = scratchDir();
    let requests = 0;
    const id = acme.axios.interceptors.request.use((config) => {
      if (config.url?.endsWith("/sign-me-up")) requests++;
      return config;
    });
    try {
      const down = accountIssuer({ dataDir: dir, directoryUrl: "https://127.0.0.1:9/dir" }, [http01Solver(tokens)]);
      const failed = await within(down(["d.burrow.test"]), ISSUE_MS, "issuance");
      expect(!failed.ok && failed.error.code).toBe("CA_UNREACHABLE");

      const issue = accountIssuer({ dataDir: dir, directoryUrl: pebble.directoryUrl, poll: POLL }, [http01Solver(tokens)]);
      for (const name of ["d.burrow.test", "e.burrow.test"]) {
        const result = await within(issue([name]), ISSUE_MS, "issuance");
        expect(result.ok).toBe(true);
      }
      expect(requests).toBe(1);
    } finally {
      acme.axios.interceptors.request.eject(id);
    }
  });

  describe("failures are values with a code, and the server goes on", () => {
    test("a name that is not a DNS name is refused before the CA is asked: BAD_NAME", async () => {
      for (const names of [["bad name.burrow.test"], ["../../etc/passwd"], [], ["*.*.burrow.test"]]) {
        const result = await obtainCertificate(account, { names, solvers: [http01Solver(tokens)] });
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.error.code).toBe("BAD_NAME");
      }
    });

    test("a name the CA refuses (Pebble's blocklist): ORDER_REFUSED with the CA's words, recorded as last_error with the next try", async () => {
      const store = new CertificateStore(scratchDir());
      const schedule = new RenewalSchedule({ store, issue: (names) => obtainCertificate(account, { names, solvers: [http01Solver(tokens)] }) });
      try {
        schedule.manage(["x.blocked.burrow.test"]);
        await within(schedule.settled(), ISSUE_MS, "the first attempt");
        const [state] = store.state();
        expect(state?.last_error?.code).toBe("ORDER_REFUSED");
        expect(state?.last_error?.message).toContain("blocked");
        expect(state?.not_after).toBeNull();
        expect(Date.parse(state!.next_renewal!) - Date.parse(state!.last_error!.at)).toBe(60_000);
      } finally {
        schedule.stop();
      }
    });

    test("a name whose lookup fails (SERVFAIL): CHALLENGE_FAILED naming the name and the CA's reason", async () => {
      await pebble.challtestsrv!.setServfail("down.burrow.test");
      const result = await within(obtainCertificate(account, { names: ["down.burrow.test"], solvers: [http01Solver(tokens)] }), ISSUE_MS, "issuance");
      expect(result.ok).toBe(false);
      if (result.ok) return;
      expect(result.error.code).toBe("CHALLENGE_FAILED");
      expect(result.error.message).toContain("down.burrow.test (http-01)");
      expect(result.error.message).toContain("could not resolve");
      expect(tokens.size).toBe(0);
    });

    test("a wildcard with no DNS-01 solver: NO_SOLVER, saying what the CA offers", async () => {
      const result = await within(obtainCertificate(account, { names: ["*.nodns.burrow.test"], solvers: [http01Solver(tokens)] }), ISSUE_MS, "issuance");
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.error.code).toBe("NO_SOLVER");
        expect(result.error.message).toContain("dns-01");
      }
    });

    test("a CA whose HTTPS certificate is not trusted: CA_UNTRUSTED", async () => {
      configureAcmeHttp({ retries: 0 });
      try {
        const result = await within(openAccount({ dataDir: scratchDir(), directoryUrl: pebble.directoryUrl }), ISSUE_MS, "account");
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.error.code).toBe("CA_UNTRUSTED");
      } finally {
        configureAcmeHttp({ caRootPem: pebble.serverCa, retries: 1, retryDelayMs: 50 });
      }
    });

    test("a CA that does not answer: CA_UNREACHABLE with the socket's code", async () => {
      const closed = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const port = closed.port;
      closed.stop(true);
      const result = await within(openAccount({ dataDir: scratchDir(), directoryUrl: `https://127.0.0.1:${port}/dir` }), ISSUE_MS, "account");
      expect(result.ok).toBe(false);
      if (!result.ok) {
        expect(result.error.code).toBe("CA_UNREACHABLE");
        expect(result.error.message).toContain("ECONNREFUSED");
      }
    });
  });
});

/** A TLS listener presenting `certPem` (whole chain), closed on dispose. */
function tlsServe(certPem: string, keyPem: string) {
  const server = Bun.listen({ hostname: "127.0.0.1", port: 0, tls: { cert: certPem, key: keyPem }, socket: { data() {} } });
  return { port: server.port, [Symbol.asyncDispose]: async () => server.stop(true) };
}

/** Whether a client trusting only `caPem` accepts the server's certificate for `serverName`. */
function handshake(port: number, serverName: string, caPem: string): Promise<boolean | string> {
  return within(
    new Promise((resolve) => {
      const socket = connect({ host: "127.0.0.1", port, servername: serverName, ca: caPem, rejectUnauthorized: false }, () => {
        resolve(socket.authorized || String(socket.authorizationError));
        socket.destroy();
      });
      socket.on("error", (err) => resolve(err.message));
    }),
    5_000,
    "TLS handshake",
  );
}
