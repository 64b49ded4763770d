/**
 * The keyed throttle behind login and handshake throttling, on a fake clock:
 * when a key locks, how long, how the lock doubles and stops growing, when
 * a key forgets, and that memory stays bounded. Then the two uses of it.
 */
import { describe, expect, test } from "bun:test";
import { AppError } from "../../src/core/errors.ts";
import { HandshakeThrottle } from "../../src/core/handshake-throttle.ts";
import { LoginThrottle } from "../../src/core/login-throttle.ts";
import { Throttle, type ThrottleRules } from "../../src/core/throttle.ts";

const S = 1000;
const MIN = 60 * S;

function fakeClock(start = 1_700_000_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

const RULES: ThrottleRules = { allowance: 3, forgetAfterMs: MIN, firstLockMs: 30 * S, maxLockMs: 4 * MIN, maxKeys: 100 };

function setup(rules: Partial<ThrottleRules> = {}) {
  const clock = fakeClock();
  return { clock, throttle: new Throttle({ ...RULES, ...rules }, clock.now) };
}

describe("Throttle", () => {
  test("a key is free until its failures reach the allowance; the one that reaches it locks for firstLockMs", () => {
    const { clock, throttle } = setup();
    expect(throttle.check("a")).toBe(0);
    expect(throttle.fail("a")).toBe(0);
    expect(throttle.fail("a")).toBe(0);
    expect(throttle.check("a")).toBe(0);
    expect(throttle.fail("a")).toBe(clock.now() + 30 * S);
    expect(throttle.check("a")).toBe(clock.now() + 30 * S);
    // other keys are not touched
    expect(throttle.check("b")).toBe(0);
  });

  test("the lock ends on time", () => {
    const { clock, throttle } = setup();
    for (let i = 0; i < 3; i++) throttle.fail("a");
    clock.advance(30 * S - 1);
    expect(throttle.check("a")).toBeGreaterThan(0);
    clock.advance(1);
    expect(throttle.check("a")).toBe(0);
  });

  test("each failure after a lock ends doubles the lock, up to maxLockMs", () => {
    const { clock, throttle } = setup({ forgetLockedAfterMs: 10 * MIN });
    let until = 0;
    for (let i = 0; i < 3; i++) until = throttle.fail("a");
    const locks: number[] = [];
    for (let i = 0; i < 6; i++) {
      clock.advance(until - clock.now()); // to the end of the lock
      expect(throttle.check("a")).toBe(0);
      until = throttle.fail("a");
      locks.push((until - clock.now()) / S);
    }
    expect(locks).toEqual([60, 120, 240, 240, 240, 240]);
  });

  test("an unlocked key with no failure for forgetAfterMs starts from zero", () => {
    const { clock, throttle } = setup();
    throttle.fail("a");
    throttle.fail("a");
    clock.advance(MIN + 1);
    expect(throttle.fail("a")).toBe(0); // the count had been forgotten: this is failure 1 of 3
    expect(throttle.fail("a")).toBe(0);
    expect(throttle.fail("a")).toBeGreaterThan(0);
  });

  test("failures less than forgetAfterMs apart keep adding up", () => {
    const { clock, throttle } = setup();
    throttle.fail("a");
    clock.advance(MIN - 1);
    throttle.fail("a");
    clock.advance(MIN - 1);
    expect(throttle.fail("a")).toBeGreaterThan(0);
  });

  test("a key that was locked is remembered for forgetLockedAfterMs, so the lock keeps doubling", () => {
    const { clock, throttle } = setup({ forgetLockedAfterMs: 10 * MIN });
    for (let i = 0; i < 3; i++) throttle.fail("a");
    clock.advance(5 * MIN); // past the lock and past forgetAfterMs, within forgetLockedAfterMs
    expect(throttle.check("a")).toBe(0);
    expect(throttle.fail("a") - clock.now()).toBe(60 * S);
    clock.advance(10 * MIN + 1); // now it is forgotten
    expect(throttle.fail("a")).toBe(0);
  });

  test("without forgetLockedAfterMs a locked key is forgotten forgetAfterMs after its last failure, once unlocked", () => {
    const { clock, throttle } = setup({ firstLockMs: 2 * MIN, maxLockMs: 10 * MIN });
    for (let i = 0; i < 3; i++) throttle.fail("a");
    clock.advance(MIN + 1); // past forgetAfterMs but still locked: remembered
    expect(throttle.check("a")).toBeGreaterThan(0);
    clock.advance(MIN); // unlocked and quiet for longer than forgetAfterMs
    expect(throttle.check("a")).toBe(0);
    expect(throttle.fail("a")).toBe(0);
  });

  test("clear forgets a key's failures and lock", () => {
    const { throttle } = setup();
    for (let i = 0; i < 3; i++) throttle.fail("a");
    throttle.clear("a");
    expect(throttle.check("a")).toBe(0);
    expect(throttle.fail("a")).toBe(0);
  });

  test("past maxKeys the key whose last failure is oldest is dropped", () => {
    const { throttle } = setup({ maxKeys: 3, allowance: 1 });
    throttle.fail("a");
    throttle.fail("b");
    throttle.fail("c");
    throttle.fail("a"); // a failed again: b is now the oldest
    throttle.fail("d");
    expect(throttle.size).toBe(3);
    expect(throttle.check("b")).toBe(0);
    for (const k of ["a", "c", "d"]) expect(throttle.check(k)).toBeGreaterThan(0);
    for (let i = 0; i < 1000; i++) throttle.fail(`k${i}`);
    expect(throttle.size).toBe(3);
  });
});

describe("HandshakeThrottle", () => {
  test("`limit` failures lock the address; the refusal is RATE_LIMITED with Retry-After in seconds", () => {
    const clock = fakeClock();
    const h = new HandshakeThrottle(5, clock.now);
    for (let i = 0; i < 4; i++) expect(h.failed("10.0.0.1", "AUTH_FAILED")).toBe(false);
    expect(h.refusal("10.0.0.1")).toBeUndefined();
    expect(h.failed("10.0.0.1", "TOKEN_DISABLED")).toBe(true);
    const r = h.refusal("10.0.0.1")!;
    expect(r).toBeInstanceOf(AppError);
    expect(r.code).toBe("RATE_LIMITED");
    expect(r.status).toBe(429);
    expect(r.headers["Retry-After"]).toBe("30");
    expect(r.message).toBe("too many failed handshakes from 10.0.0.1; try again in 30 s");
    clock.advance(12_500);
    expect(h.refusal("10.0.0.1")!.headers["Retry-After"]).toBe("18");
    expect(h.refusal("10.0.0.2")).toBeUndefined();
  });

  test("only AUTH_FAILED, TOKEN_DISABLED and PROTOCOL_ERROR count", () => {
    const h = new HandshakeThrottle(2, fakeClock().now);
    for (const code of ["USER_DISABLED", "TUNNEL_LIMIT", "SUBDOMAIN_TAKEN", "VERSION_MISMATCH", "HANDSHAKE_TIMEOUT"]) {
      for (let i = 0; i < 5; i++) expect(h.failed("a", code)).toBe(false);
    }
    expect(h.refusal("a")).toBeUndefined();
    h.failed("a", "PROTOCOL_ERROR");
    expect(h.failed("a", "AUTH_FAILED")).toBe(true);
  });

  test("the lock doubles for an address that fails again as soon as it ends, and stays at 15 min", () => {
    const clock = fakeClock();
    const h = new HandshakeThrottle(1, clock.now);
    h.failed("a", "AUTH_FAILED");
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const s = Number(h.refusal("a")!.headers["Retry-After"]);
      waits.push(s);
      clock.advance(s * S);
      expect(h.refusal("a")).toBeUndefined();
      h.failed("a", "AUTH_FAILED");
    }
    expect(waits).toEqual([30, 60, 120, 240, 480, 900, 900, 900]);
  });
});

describe("LoginThrottle on Throttle", () => {
  test("5 failures for one username lock it (right password or not) for 30 s; another username is free", () => {
    const clock = fakeClock();
    const l = new LoginThrottle(clock.now);
    for (let i = 0; i < 5; i++) l.fail(`10.0.0.${i}`, "Alice");
    expect(() => l.check("10.0.0.9", "alice")).toThrow("try again in 30 s");
    expect(() => l.check("10.0.0.9", "bob")).not.toThrow();
    clock.advance(30 * S);
    expect(() => l.check("10.0.0.9", "alice")).not.toThrow();
  });

  test("20 failures from one address lock it whatever the username; success clears the username only", () => {
    const clock = fakeClock();
    const l = new LoginThrottle(clock.now);
    for (let i = 0; i < 19; i++) l.fail("10.0.0.1", `user${i}`);
    l.fail("10.0.0.1", "carol");
    l.succeed("carol");
    try {
      l.check("10.0.0.1", "carol");
      throw new Error("not throttled");
    } catch (err) {
      expect((err as AppError).code).toBe("TOO_MANY_REQUESTS");
      expect((err as AppError).headers["Retry-After"]).toBe("30");
    }
    expect(() => l.check("10.0.0.2", "carol")).not.toThrow();
  });
});
