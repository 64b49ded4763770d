/**
 * How ACME requests fail, against a CA that misbehaves on purpose (a plain
 * HTTP Bun.serve on loopback): retries of 5xx, a 429 with its Retry-After,
 * and each fault turned into a failure with its code. Also the CA root file
 * and the Retry-After parser.
 */
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openAccount } from "../../src/acme/account.ts";
import { AcmeStepError, failureOf } from "../../src/acme/errors.ts";
import { configureAcmeHttp, parseRetryAfter, readCaRoot } from "../../src/acme/http-client.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { within } from "../harness/wait.ts";

const dir = mkdtempSync(join(tmpdir(), "burrow-acme-http-"));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  configureAcmeHttp();
});

let server: ReturnType<typeof Bun.serve> | undefined;
afterEach(() => server?.stop(true));

/** A "CA" answering every request with `answer(n)` (n counts from 1). */
function fakeCa(answer: (n: number) => Response): { url: string; count: () => number } {
  let n = 0;
  server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => answer(++n) });
  return { url: `http://127.0.0.1:${server.port}/dir`, count: () => n };
}

describe("a CA that misbehaves", () => {
  test("a 429 fails the attempt at once as RATE_LIMITED, carrying the CA's Retry-After", async () => {
    configureAcmeHttp({ retries: 2, retryDelayMs: 10 });
    const ca = fakeCa(() => Response.json({ type: "urn:ietf:params:acme:error:rateLimited", detail: "too many new orders recently" }, { status: 429, headers: { "retry-after": "3600" } }));
    const before = Date.now();
    const result = await within(openAccount({ dataDir: dir, directoryUrl: ca.url }), 5_000, "account");
    expect(ca.count()).toBe(1);
    expect(result.ok).toBe(false);
    if (result.ok) return;
    expect(result.error.code).toBe("RATE_LIMITED");
    expect(result.error.message).toContain("too many new orders recently");
    const retryAfter = Date.parse(result.error.retryAfter!);
    expect(retryAfter).toBeGreaterThanOrEqual(before + 3_600_000 - 1_000);
    expect(retryAfter).toBeLessThanOrEqual(Date.now() + 3_600_000);
  });

  test("5xx is retried a few times, then the attempt fails as CA_ERROR with the CA's detail", async () => {
    configureAcmeHttp({ retries: 2, retryDelayMs: 10 });
    const ca = fakeCa(() => Response.json({ detail: "database on fire" }, { status: 503 }));
    const result = await within(openAccount({ dataDir: dir, directoryUrl: ca.url }), 5_000, "account");
    expect(ca.count()).toBe(3);
    expect(!result.ok && result.error.code).toBe("CA_ERROR");
    expect(!result.ok && result.error.message).toContain("database on fire");
  });

  test("a 5xx followed by an answer is not a failure of the request", async () => {
    configureAcmeHttp({ retries: 2, retryDelayMs: 10 });
    // the directory, once it answers, has no newNonce: the account step fails, but after the retry got through
    const ca = fakeCa((n) => (n === 1 ? new Response("busy", { status: 502 }) : Response.json({ meta: {} })));
    const result = await within(openAccount({ dataDir: dir, directoryUrl: ca.url }), 5_000, "account");
    expect(ca.count()).toBeGreaterThanOrEqual(2);
    expect(!result.ok && result.error.code).toBe("ACCOUNT_REFUSED");
  });

  test("a CA that never answers fails at the request timeout, not later", async () => {
    configureAcmeHttp({ retries: 0, requestTimeoutMs: 300 });
    const silent = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const started = performance.now();
      const result = await within(openAccount({ dataDir: dir, directoryUrl: `http://127.0.0.1:${silent.port}/dir` }), 5_000, "account");
      expect(performance.now() - started).toBeLessThan(3_000);
      expect(!result.ok && result.error.code).toBe("CA_UNREACHABLE");
    } finally {
      silent.stop(true);
    }
  });
});

describe("--acme-ca-root FILE", () => {
  test("one or more PEM certificates are read and checked", async () => {
    const a = await selfSignedCertificate({ names: ["a.test"] });
    const b = await selfSignedCertificate({ names: ["b.test"] });
    writeFileSync(join(dir, "roots.pem"), `# two roots\n${a.certPem}${b.certPem}`);
    const read = readCaRoot(join(dir, "roots.pem"));
    expect(read.ok && read.value).toBe(`${a.certPem.trim()}\n${b.certPem.trim()}\n`);
  });

  test("a missing file, or one without a certificate, is CA_UNTRUSTED saying which", () => {
    writeFileSync(join(dir, "not.pem"), "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n");
    writeFileSync(join(dir, "empty.pem"), "");
    for (const name of ["missing.pem", "not.pem", "empty.pem"]) {
      const read = readCaRoot(join(dir, name));
      expect(read.ok).toBe(false);
      if (!read.ok) {
        expect(read.error.code).toBe("CA_UNTRUSTED");
        expect(read.error.message).toContain(name);
      }
    }
  });
});

describe("Retry-After and failure codes", () => {
  const now = new Date("2030-01-01T00:00:00Z");
  test.each([
    ["120", "2030-01-01T00:02:00.000Z"],
    ["Wed, 02 Jan 2030 03:04:05 GMT", "2030-01-02T03:04:05.000Z"],
    ["soon", undefined],
    ["", undefined],
  ])("Retry-After %p", (header, expected) => {
    expect(parseRetryAfter(header, now)?.toISOString()).toBe(expected as string);
  });

  test("transport faults keep their meaning whatever step met them; other errors take the step's code", () => {
    const refused = Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
    expect(failureOf(refused, "CHALLENGE_FAILED", now).code).toBe("CA_UNREACHABLE");
    const untrusted = new Error("wrapped", { cause: Object.assign(new Error("self signed"), { code: "SELF_SIGNED_CERT_IN_CHAIN" }) });
    expect(failureOf(untrusted, "ORDER_REFUSED", now).code).toBe("CA_UNTRUSTED");
    expect(failureOf(new Error("forbidden by policy"), "ORDER_REFUSED", now)).toEqual({ code: "ORDER_REFUSED", message: "the ACME CA refused the names: forbidden by policy", at: now.toISOString() });
    const limited = new AcmeStepError("RATE_LIMITED", "slow down", new Date("2030-01-01T01:00:00Z"));
    expect(failureOf(limited, "CA_ERROR", now)).toEqual({ code: "RATE_LIMITED", message: "slow down", at: now.toISOString(), retryAfter: "2030-01-01T01:00:00.000Z" });
  });
});
