/**
 * The renewal schedule with a fake clock and fake timers: when it issues,
 * renews, retries and gives way, with issuance itself faked (a certificate
 * made here, or a failure value); one real renewal against Pebble is in
 * renewal-pebble.test.ts.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CertificateStore } from "../../src/acme/certificate-store.ts";
import type { AcmeErrorCode, AcmeResult } from "../../src/acme/errors.ts";
import type { IssuedCertificate } from "../../src/acme/issuer.ts";
import { MAX_TIMER_STEP_MS, RenewalSchedule, retryDelay, RETRY_MAX_MS, RETRY_MIN_MS, type CertificateResult, type RenewalOptions, type Timers } from "../../src/acme/renewal.ts";
import type { Clock } from "../../src/core/clock.ts";
import { selfSignedCertificate } from "../harness/certs.ts";

const MIN = 60 * 1000;
const DAY = 24 * 60 * MIN;
const LIFETIME = 90 * DAY;

/** A clock and timers that move only when told; `advance` fires what falls due, in order. */
class FakeTime implements Clock, Timers {
  private t = Date.parse("2030-01-01T00:00:00Z");
  private next = 1;
  readonly pending = new Map<number, { at: number; fn: () => void }>();
  /** Every delay asked for, to check that none exceeds the step limit. */
  readonly delays: number[] = [];

  now = () => new Date(this.t);
  set = (fn: () => void, ms: number) => {
    this.delays.push(ms);
    const id = this.next++;
    this.pending.set(id, { at: this.t + ms, fn });
    return id;
  };
  clear = (id: unknown) => void this.pending.delete(id as number);

  async advance(ms: number, settle: () => Promise<void>): Promise<void> {
    const end = this.t + ms;
    for (;;) {
      await settle();
      const due = [...this.pending.entries()].filter(([, p]) => p.at <= end).sort((a, b) => a[1].at - b[1].at)[0];
      if (!due) break;
      this.pending.delete(due[0]);
      this.t = due[1].at;
      due[1].fn();
    }
    this.t = end;
    await settle();
  }
}

/** Issuance that answers from a script: a certificate valid from "now" for LIFETIME, or a failure. */
class FakeIssuer {
  readonly calls: { at: Date; names: string[] }[] = [];
  failWith: AcmeErrorCode | null = null;
  retryAfter: Date | null = null;
  constructor(private readonly time: FakeTime) {}

  issue = async (names: string[]): Promise<AcmeResult<IssuedCertificate>> => {
    const at = this.time.now();
    this.calls.push({ at, names });
    if (this.failWith) {
      return { ok: false, error: { code: this.failWith, message: "scripted", at: at.toISOString(), ...(this.retryAfter ? { retryAfter: this.retryAfter.toISOString() } : {}) } };
    }
    const c = await selfSignedCertificate({ names, notBefore: at, notAfter: new Date(at.getTime() + LIFETIME) });
    return { ok: true, value: { names, certPem: c.certPem, keyPem: c.keyPem } };
  };
}

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function setup(onResult?: RenewalOptions["onResult"]) {
  const time = new FakeTime();
  const dir = mkdtempSync(join(tmpdir(), "burrow-renewal-"));
  dirs.push(dir);
  const store = new CertificateStore(dir, time);
  const issuer = new FakeIssuer(time);
  const schedule = new RenewalSchedule({ store, issue: issuer.issue, clock: time, timers: time, onResult });
  const advance = (ms: number) => time.advance(ms, () => schedule.settled());
  return { time, store, issuer, schedule, advance, t0: time.now().getTime() };
}

describe("retry delays", () => {
  test("double from a minute and stop at an hour", () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 100].map((n) => retryDelay(n))).toEqual([1, 2, 4, 8, 16, 32, 60, 60, 60].map((m) => m * MIN));
    expect(RETRY_MIN_MS).toBe(MIN);
    expect(RETRY_MAX_MS).toBe(60 * MIN);
  });
});

describe("the renewal schedule", () => {
  test("each attempt's end is told (the certificate events): issued with its end, failed with its code and the end of the one in use", async () => {
    const told: CertificateResult[] = [];
    const { issuer, schedule, advance, t0 } = setup((r) => told.push(r));
    schedule.manage(["told.example.com"]);
    await advance(0);
    expect(told).toEqual([{ names: ["told.example.com"], ok: true, notAfter: new Date(t0 + LIFETIME) }]);
    issuer.failWith = "CHALLENGE_FAILED";
    await advance(60 * DAY);
    expect(told[1]).toEqual({ names: ["told.example.com"], ok: false, code: "CHALLENGE_FAILED", message: "scripted", notAfter: new Date(t0 + LIFETIME) });
  });

  test("a name without a certificate is issued at once, then renewed two thirds into its lifetime, not before", async () => {
    const { store, issuer, schedule, advance, t0 } = setup();
    schedule.manage(["demo.example.com"]);
    await advance(0);
    expect(issuer.calls.map((c) => c.at.getTime())).toEqual([t0]);
    const renewAt = t0 + 60 * DAY;
    expect(store.state()[0]).toMatchObject({ id: "demo.example.com", last_error: null, next_renewal: new Date(renewAt).toISOString() });

    await advance(60 * DAY - 1);
    expect(issuer.calls).toHaveLength(1);
    await advance(1);
    expect(issuer.calls.map((c) => c.at.getTime())).toEqual([t0, renewAt]);
    expect(store.get("demo.example.com")?.notBefore.getTime()).toBe(renewAt);
    expect(store.state()[0]?.next_renewal).toBe(new Date(renewAt + 60 * DAY).toISOString());
  });

  test("a certificate already on disk is not issued again until it is due", async () => {
    const { time, store, issuer, schedule, advance, t0 } = setup();
    const c = await selfSignedCertificate({ names: ["a.example.com"], notBefore: new Date(t0 - 30 * DAY), notAfter: new Date(t0 + 60 * DAY) });
    store.save("a.example.com", c.certPem, c.keyPem);
    schedule.manage(["a.example.com"]);
    await advance(29 * DAY);
    expect(issuer.calls).toHaveLength(0);
    await advance(DAY);
    expect(issuer.calls.map((c) => c.at.getTime())).toEqual([t0 + 30 * DAY]);
    // waits of weeks are taken in steps of at most MAX_TIMER_STEP_MS (setTimeout cannot wait past 24.8 days)
    expect(Math.max(...time.delays)).toBeLessThanOrEqual(MAX_TIMER_STEP_MS);
  });

  test("failures are retried after 1, 2, 4... minutes up to an hour, each recorded as last_error; a success clears it", async () => {
    const { store, issuer, schedule, advance, t0 } = setup();
    issuer.failWith = "CHALLENGE_FAILED";
    schedule.manage(["down.example.com"]);
    await advance(0);
    expect(store.state()[0]).toMatchObject({ last_error: { code: "CHALLENGE_FAILED", message: "scripted" }, next_renewal: new Date(t0 + MIN).toISOString(), not_after: null });

    await advance(5 * 60 * MIN);
    const gaps = issuer.calls.slice(1).map((c, i) => (c.at.getTime() - issuer.calls[i]!.at.getTime()) / MIN);
    expect(gaps.slice(0, 9)).toEqual([1, 2, 4, 8, 16, 32, 60, 60, 60]);

    issuer.failWith = null;
    await advance(60 * MIN);
    const [state] = store.state();
    expect(state?.last_error).toBeNull();
    expect(state?.not_after).not.toBeNull();
    const calls = issuer.calls.length;
    await advance(DAY);
    expect(issuer.calls).toHaveLength(calls);
  });

  test("a failed renewal keeps the old certificate served while it retries", async () => {
    const { store, issuer, schedule, advance } = setup();
    schedule.manage(["a.example.com"]);
    await advance(0);
    const first = store.get("a.example.com")!.fingerprint;
    issuer.failWith = "CA_UNREACHABLE";
    await advance(60 * DAY + 10 * MIN);
    expect(issuer.calls.length).toBeGreaterThan(2);
    expect(store.pick("a.example.com")?.fingerprint).toBe(first);
    expect(store.state()[0]?.last_error?.code).toBe("CA_UNREACHABLE");
  });

  test("the CA's Retry-After wins over a shorter backoff", async () => {
    const { issuer, schedule, advance, t0 } = setup();
    issuer.failWith = "RATE_LIMITED";
    issuer.retryAfter = new Date(t0 + 3 * 60 * MIN);
    schedule.manage(["busy.example.com"]);
    await advance(3 * 60 * MIN - 1);
    expect(issuer.calls).toHaveLength(1);
    await advance(1);
    expect(issuer.calls).toHaveLength(2);
  });

  test("the same names again change nothing; other names for the same id are issued at once", async () => {
    const { issuer, schedule, advance } = setup();
    schedule.manage(["t.example.com"]);
    await advance(0);
    schedule.manage(["t.example.com"]);
    await advance(MIN);
    expect(issuer.calls).toHaveLength(1);
    schedule.manage(["t.example.com", "*.t.example.com"]);
    await advance(0);
    expect(issuer.calls.map((c) => c.names)).toEqual([["t.example.com"], ["t.example.com", "*.t.example.com"]]);
  });

  test("renewNow tries at once and joins an attempt in flight; unmanage and stop end the timers", async () => {
    const { time, issuer, schedule, advance } = setup();
    schedule.manage(["a.example.com"]);
    const joined = schedule.renewNow("a.example.com");
    await advance(0);
    expect(issuer.calls).toHaveLength(1);
    expect((await joined)?.ok).toBe(true);

    const now = await schedule.renewNow("a.example.com");
    expect(now?.ok).toBe(true);
    expect(issuer.calls).toHaveLength(2);
    expect(schedule.renewNow("unknown.example.com")).toBeUndefined();

    schedule.unmanage("a.example.com");
    expect(time.pending.size).toBe(0);
    schedule.manage(["b.example.com"]);
    await advance(0);
    schedule.stop();
    expect(time.pending.size).toBe(0);
    await advance(100 * DAY);
    expect(issuer.calls).toHaveLength(3);
  });

  test("an issuer that throws (a bug) is recorded as a failure and retried, not a crash", async () => {
    const { store, schedule, advance, time } = setup();
    const broken = new RenewalSchedule({
      store,
      clock: time,
      timers: time,
      issue: async () => {
        throw new Error("boom");
      },
    });
    broken.manage(["x.example.com"]);
    await time.advance(0, () => broken.settled());
    expect(store.state()[0]?.last_error).toMatchObject({ code: "CA_ERROR", message: "the ACME CA failed: boom" });
    broken.stop();
    schedule.stop();
    await advance(0);
  });
});
