/**
 * The keyed throttle behind login and handshake throttling, on a fake clock:
 * when a key locks, how long, how the lock doubles and stops growing, when
 * a key forgets, and that memory stays bounded; attempts in flight counted
 * as failures until settled (the login race). Then two uses of it.
 */
import { describe, expect, test } from "bun:test";
import { AppError } from "../../src/core/errors.ts";
import { HandshakeThrottle } from "../../src/core/handshake-throttle.ts";
import { LoginThrottle } from "../../src/core/login-throttle.ts";
import { reserveEachInTurn, Throttle, type ThrottleRules } from "../../src/core/throttle.ts";

const S = 1000;
const MIN = 60 * S;

function fakeClock(start = 1_700_000_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

const RULES: ThrottleRules = { allowance: 3, forgetAfterMs: MIN, firstLockMs: 30 * S, maxLockMs: 4 * MIN, maxKeys: 100 };

/** A wrong attempt, reserved and failed at once (as a check with nothing to wait for); when the lock ends if it locked the key, else 0. */
function fail(throttle: Throttle, key: string): number {
  const r = throttle.reserve(key);
  if (!r.ticket) throw new Error(`${key} is refused: ${JSON.stringify(r)}`);
  return r.ticket.failed();
}

/** When the key's lock ends, or 0 when an attempt may be made now (the probe gives its reservation back). */
function check(throttle: Throttle, key: string): number {
  const r = throttle.reserve(key);
  if (r.ticket) {
    r.ticket[Symbol.dispose]();
    return 0;
  }
  return r.locked ? r.retryAt : -1;
}

function setup(rules: Partial<ThrottleRules> = {}) {
  const clock = fakeClock();
  return { clock, throttle: new Throttle({ ...RULES, ...rules }, clock.now) };
}

describe("Throttle", () => {
  test("a key is free until its failures reach the allowance; the one that reaches it locks for firstLockMs", () => {
    const { clock, throttle } = setup();
    expect(check(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBe(0);
    expect(check(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBe(clock.now() + 30 * S);
    expect(check(throttle, "a")).toBe(clock.now() + 30 * S);
    // other keys are not touched
    expect(check(throttle, "b")).toBe(0);
  });

  test("the lock ends on time", () => {
    const { clock, throttle } = setup();
    for (let i = 0; i < 3; i++) fail(throttle, "a");
    clock.advance(30 * S - 1);
    expect(check(throttle, "a")).toBeGreaterThan(0);
    clock.advance(1);
    expect(check(throttle, "a")).toBe(0);
  });

  test("each failure after a lock ends doubles the lock, up to maxLockMs", () => {
    const { clock, throttle } = setup({ forgetLockedAfterMs: 10 * MIN });
    let until = 0;
    for (let i = 0; i < 3; i++) until = fail(throttle, "a");
    const locks: number[] = [];
    for (let i = 0; i < 6; i++) {
      clock.advance(until - clock.now()); // to the end of the lock
      expect(check(throttle, "a")).toBe(0);
      until = fail(throttle, "a");
      locks.push((until - clock.now()) / S);
    }
    expect(locks).toEqual([60, 120, 240, 240, 240, 240]);
  });

  test("an unlocked key with no failure for forgetAfterMs starts from zero", () => {
    const { clock, throttle } = setup();
    fail(throttle, "a");
    fail(throttle, "a");
    clock.advance(MIN + 1);
    expect(fail(throttle, "a")).toBe(0); // the count had been forgotten: this is failure 1 of 3
    expect(fail(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBeGreaterThan(0);
  });

  test("failures less than forgetAfterMs apart keep adding up", () => {
    const { clock, throttle } = setup();
    fail(throttle, "a");
    clock.advance(MIN - 1);
    fail(throttle, "a");
    clock.advance(MIN - 1);
    expect(fail(throttle, "a")).toBeGreaterThan(0);
  });

  test("a key that was locked is remembered for forgetLockedAfterMs, so the lock keeps doubling", () => {
    const { clock, throttle } = setup({ forgetLockedAfterMs: 10 * MIN });
    for (let i = 0; i < 3; i++) fail(throttle, "a");
    clock.advance(5 * MIN); // past the lock and past forgetAfterMs, within forgetLockedAfterMs
    expect(check(throttle, "a")).toBe(0);
    expect(fail(throttle, "a") - clock.now()).toBe(60 * S);
    clock.advance(10 * MIN + 1); // now it is forgotten
    expect(fail(throttle, "a")).toBe(0);
  });

  test("without forgetLockedAfterMs a locked key is forgotten forgetAfterMs after its last failure, once unlocked", () => {
    const { clock, throttle } = setup({ firstLockMs: 2 * MIN, maxLockMs: 10 * MIN });
    for (let i = 0; i < 3; i++) fail(throttle, "a");
    clock.advance(MIN + 1); // past forgetAfterMs but still locked: remembered
    expect(check(throttle, "a")).toBeGreaterThan(0);
    clock.advance(MIN); // unlocked and quiet for longer than forgetAfterMs
    expect(check(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBe(0);
  });

  test("clear forgets a key's failures and lock", () => {
    const { throttle } = setup();
    for (let i = 0; i < 3; i++) fail(throttle, "a");
    throttle.clear("a");
    expect(check(throttle, "a")).toBe(0);
    expect(fail(throttle, "a")).toBe(0);
  });

  test("past maxKeys the key whose last failure is oldest is dropped", () => {
    const { throttle } = setup({ maxKeys: 3, allowance: 1 });
    throttle.addFailure("a");
    throttle.addFailure("b");
    throttle.addFailure("c");
    throttle.addFailure("a"); // a failed again: b is now the oldest
    throttle.addFailure("d");
    expect(throttle.size).toBe(3);
    expect(check(throttle, "b")).toBe(0);
    for (const k of ["a", "c", "d"]) expect(check(throttle, k)).toBeGreaterThan(0);
    for (let i = 0; i < 1000; i++) throttle.addFailure(`k${i}`);
    expect(throttle.size).toBe(3);
  });
});

describe("Throttle: attempts in flight count as failures until settled", () => {
  test("a burst of reservations gets the allowance and no more; the rest are refused as in flight, not as locked", () => {
    const { clock, throttle } = setup();
    const tickets = [0, 1, 2].map(() => throttle.reserve("a").ticket!);
    expect(tickets.every((t) => t !== undefined)).toBe(true);
    const fourth = throttle.reserve("a");
    expect(fourth.ticket).toBeUndefined();
    expect(fourth).toMatchObject({ locked: false, retryAt: clock.now() + 1000 });
    // the three fail: the key locks, as three failures one after another lock it
    expect(tickets[0]!.failed()).toBe(0);
    expect(tickets[1]!.failed()).toBe(0);
    expect(tickets[2]!.failed()).toBe(clock.now() + 30 * S);
    expect(throttle.reserve("a")).toMatchObject({ locked: true, retryAt: clock.now() + 30 * S });
  });

  test("the right secret after a burst of wrong ones is refused while the lock lasts (the login race)", async () => {
    const { throttle } = setup();
    // 40 attempts at once, the last one right: each is reserved before its (slow) check
    const verdicts = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        const r = await throttle.reserveInTurn("admin");
        if (!r.ticket) return r.locked ? "locked" : "busy";
        using attempt = r.ticket;
        await Bun.sleep(1); // the check takes time
        if (i === 39) {
          attempt.succeeded();
          return "ok";
        }
        attempt.failed();
        return "wrong";
      }),
    );
    expect(verdicts.filter((v) => v === "wrong")).toHaveLength(3);
    expect(verdicts.filter((v) => v === "locked")).toHaveLength(37);
    expect(verdicts[39]).toBe("locked");
  });

  test("a success gives its place back: the next attempt waiting its turn goes on", async () => {
    const { throttle } = setup();
    const held = [0, 1, 2].map(() => throttle.reserve("a").ticket!);
    let fourth: Awaited<ReturnType<Throttle["reserveInTurn"]>> | undefined;
    const waiting = throttle.reserveInTurn("a").then((r) => (fourth = r));
    await Bun.sleep(1);
    expect(fourth).toBeUndefined(); // still waiting: three are in flight
    held[0]!.succeeded();
    await waiting;
    expect(fourth?.ticket).toBeDefined();
    for (const t of [...held, fourth!.ticket!]) t[Symbol.dispose]();
    expect(throttle.size).toBe(0); // nothing failed: nothing is kept
  });

  test("a failure that does not lock leaves the waiting attempt waiting; the one that locks refuses it", async () => {
    const { throttle } = setup();
    const held = [0, 1, 2].map(() => throttle.reserve("a").ticket!);
    let fourth: Awaited<ReturnType<Throttle["reserveInTurn"]>> | undefined;
    const waiting = throttle.reserveInTurn("a").then((r) => (fourth = r));
    held[0]!.failed();
    held[1]!.failed();
    await Bun.sleep(1);
    expect(fourth).toBeUndefined();
    held[2]!.failed();
    await waiting;
    expect(fourth).toMatchObject({ locked: true });
  });

  test("disposing of an unsettled ticket gives its place back without a failure; settling twice counts once", () => {
    const { throttle } = setup();
    for (let i = 0; i < 10; i++) {
      using _t = throttle.reserve("a").ticket!;
    }
    expect(check(throttle, "a")).toBe(0);
    const t = throttle.reserve("a").ticket!;
    t.failed();
    t.failed();
    t.succeeded();
    t[Symbol.dispose]();
    expect(fail(throttle, "a")).toBe(0); // failure 2 of 3
    expect(fail(throttle, "a")).toBeGreaterThan(0);
  });

  test("once a key has been locked, one attempt at a time after the lock: the next failure locks it again", async () => {
    const { clock, throttle } = setup();
    for (let i = 0; i < 3; i++) fail(throttle, "a");
    clock.advance(30 * S);
    const one = throttle.reserve("a").ticket!;
    expect(throttle.reserve("a")).toMatchObject({ locked: false });
    expect(one.failed() - clock.now()).toBe(60 * S);
  });

  test("an attempt waits its turn at most maxWaitMs, then is refused as in flight", async () => {
    const { throttle } = setup({ allowance: 1 });
    using _held = throttle.reserve("a").ticket!;
    const r = await throttle.reserveInTurn("a", 20);
    expect(r).toMatchObject({ locked: false });
  });

  test("reserving never pushes a key's failures out; a key dropped for memory counts a late failure afresh", () => {
    const { throttle } = setup({ maxKeys: 2, allowance: 1 });
    throttle.addFailure("a");
    throttle.addFailure("b");
    for (let i = 0; i < 100; i++) throttle.reserve(`probe${i}`).ticket![Symbol.dispose]();
    expect(throttle.reserve("a")).toMatchObject({ locked: true });
    expect(throttle.reserve("b")).toMatchObject({ locked: true });
    const t = throttle.reserve("c").ticket!;
    throttle.addFailure("d");
    throttle.addFailure("e"); // a and b are dropped for memory
    expect(t.failed()).toBeGreaterThan(0); // c: counted, and it locks (allowance 1)
    expect(throttle.reserve("a").ticket).toBeDefined();
  });

  test("clear forgets failures and the lock, not the attempts in flight", () => {
    const { throttle } = setup();
    fail(throttle, "a");
    fail(throttle, "a");
    const a = throttle.reserve("a").ticket!;
    throttle.clear("a");
    const b = throttle.reserve("a").ticket!;
    const c = throttle.reserve("a").ticket!;
    expect(throttle.reserve("a")).toMatchObject({ locked: false }); // a, b, c in flight
    for (const t of [a, b, c]) t.succeeded();
  });

  test("judgeNow: refused while locked or full, a false verdict counted, an undefined one (no attempt) not", () => {
    const { throttle } = setup();
    for (let i = 0; i < 10; i++) expect(throttle.judgeNow("a", () => undefined)).toEqual({ passed: undefined });
    expect(throttle.judgeNow("a", () => false)).toEqual({ passed: false });
    expect(throttle.judgeNow("a", () => true)).toEqual({ passed: true });
    expect(throttle.judgeNow("a", () => false)).toEqual({ passed: false });
    const held = throttle.reserve("a").ticket!;
    let ran = false;
    expect(throttle.judgeNow("a", () => (ran = true))).toMatchObject({ retryAt: expect.any(Number) }); // the one left is in flight
    expect(ran).toBe(false);
    held.failed();
    expect(throttle.judgeNow("a", () => (ran = true)).retryAt).toBeGreaterThan(0); // locked
    expect(ran).toBe(false);
  });

  test("take counts every attempt (a rate), refused once locked; addFailure counts one judged elsewhere", () => {
    const { clock, throttle } = setup();
    expect(throttle.take("a")).toBe(0);
    expect(throttle.take("a")).toBe(0);
    expect(throttle.take("a")).toBe(0);
    expect(throttle.take("a")).toBe(clock.now() + 30 * S);
    throttle.addFailure("b");
    throttle.addFailure("b");
    expect(throttle.addFailure("b")).toBe(clock.now() + 30 * S);
  });

  test("reserveEachInTurn: one ticket for several keys; a refusal on one gives the others back", async () => {
    const { throttle } = setup();
    const other = new Throttle({ ...RULES, allowance: 1 }, () => 0);
    const both = await reserveEachInTurn([
      [throttle, "addr"],
      [other, "user"],
    ]);
    expect(both.ticket).toBeDefined();
    // user's one place is taken until the first settles: the second waits for it, holding a place on addr
    const second = reserveEachInTurn([
      [throttle, "addr"],
      [other, "user"],
    ]);
    both.ticket!.failed();
    expect(await second).toMatchObject({ locked: true });
    // addr's place was given back: one failure only, from the first
    expect(fail(throttle, "addr")).toBe(0);
    expect(fail(throttle, "addr")).toBeGreaterThan(0);
  });
});

describe("HandshakeThrottle", () => {
  async function failed(h: HandshakeThrottle, address: string, code: string): Promise<void> {
    const r = await h.reserve(address);
    if (!r.ticket) throw new Error(`refused: ${r.refusal.message}`);
    r.ticket.ended(code);
  }

  test("`limit` failures lock the address; the refusal is RATE_LIMITED with Retry-After in seconds", async () => {
    const clock = fakeClock();
    const h = new HandshakeThrottle(5, clock.now);
    for (let i = 0; i < 4; i++) await failed(h, "10.0.0.1", "AUTH_FAILED");
    await failed(h, "10.0.0.1", "TOKEN_DISABLED");
    const r = (await h.reserve("10.0.0.1")).refusal!;
    expect(r).toBeInstanceOf(AppError);
    expect(r.code).toBe("RATE_LIMITED");
    expect(r.status).toBe(429);
    expect(r.headers["Retry-After"]).toBe("30");
    expect(r.message).toBe("too many failed handshakes from 10.0.0.1; try again in 30 s");
    clock.advance(12_500);
    expect((await h.reserve("10.0.0.1")).refusal!.headers["Retry-After"]).toBe("18");
    expect((await h.reserve("10.0.0.2")).ticket).toBeDefined();
  });

  test("only AUTH_FAILED, TOKEN_DISABLED and PROTOCOL_ERROR count", async () => {
    const h = new HandshakeThrottle(2, fakeClock().now);
    for (const code of ["READY", "MOVE", "USER_DISABLED", "TUNNEL_LIMIT", "SUBDOMAIN_TAKEN", "VERSION_MISMATCH", "HANDSHAKE_TIMEOUT"]) {
      for (let i = 0; i < 5; i++) await failed(h, "a", code);
    }
    await failed(h, "a", "PROTOCOL_ERROR");
    await failed(h, "a", "AUTH_FAILED");
    expect((await h.reserve("a")).refusal?.code).toBe("RATE_LIMITED");
  });

  test("HELLOs at once: `limit` are judged, the others wait; good ones all come through in turn, bad ones meet the lock", async () => {
    const h = new HandshakeThrottle(3, fakeClock().now);
    // a fleet behind one address: 50 at once, every token good
    const good = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const r = await h.reserve("fleet");
        if (!r.ticket) return r.refusal.code;
        await Bun.sleep(1);
        r.ticket.ended("READY");
        return "READY";
      }),
    );
    expect(good).toEqual(Array(50).fill("READY"));
    // guesses: 50 at once, every token wrong
    const bad = await Promise.all(
      Array.from({ length: 50 }, async () => {
        const r = await h.reserve("guesser");
        if (!r.ticket) return r.refusal.code;
        await Bun.sleep(1);
        r.ticket.ended("AUTH_FAILED");
        return "AUTH_FAILED";
      }),
    );
    expect(bad.filter((c) => c === "AUTH_FAILED")).toHaveLength(3);
    expect(bad.filter((c) => c === "RATE_LIMITED")).toHaveLength(47);
  });

  test("the lock doubles for an address that fails again as soon as it ends, and stays at 15 min", async () => {
    const clock = fakeClock();
    const h = new HandshakeThrottle(1, clock.now);
    await failed(h, "a", "AUTH_FAILED");
    const waits: number[] = [];
    for (let i = 0; i < 8; i++) {
      const s = Number((await h.reserve("a")).refusal!.headers["Retry-After"]);
      waits.push(s);
      clock.advance(s * S);
      await failed(h, "a", "AUTH_FAILED");
    }
    expect(waits).toEqual([30, 60, 120, 240, 480, 900, 900, 900]);
  });
});

describe("LoginThrottle on Throttle", () => {
  async function failed(l: LoginThrottle, address: string, username: string): Promise<void> {
    using attempt = await l.reserve(address, username);
    attempt.failed();
  }
  const refusal = (l: LoginThrottle, address: string, username: string) =>
    l.reserve(address, username).then(
      (a) => {
        a[Symbol.dispose]();
        return undefined;
      },
      (err: AppError) => err,
    );

  test("5 failures for one username lock it (right password or not) for 30 s; another username is free", async () => {
    const clock = fakeClock();
    const l = new LoginThrottle(clock.now);
    for (let i = 0; i < 5; i++) await failed(l, `10.0.0.${i}`, "Alice");
    expect((await refusal(l, "10.0.0.9", "alice"))?.message).toBe("too many failed logins; try again in 30 s");
    expect(await refusal(l, "10.0.0.9", "bob")).toBeUndefined();
    clock.advance(30 * S);
    expect(await refusal(l, "10.0.0.9", "alice")).toBeUndefined();
  });

  test("20 failures from one address lock it whatever the username; success clears the username only", async () => {
    const clock = fakeClock();
    const l = new LoginThrottle(clock.now);
    for (let i = 0; i < 19; i++) await failed(l, "10.0.0.1", `user${i}`);
    {
      using attempt = await l.reserve("10.0.0.1", "carol");
      attempt.failed();
    }
    const err = await refusal(l, "10.0.0.1", "carol");
    expect(err?.code).toBe("TOO_MANY_REQUESTS");
    expect(err?.headers["Retry-After"]).toBe("30");
    expect(await refusal(l, "10.0.0.2", "carol")).toBeUndefined();
    for (let i = 0; i < 4; i++) await failed(l, "10.0.0.3", "dave");
    (await l.reserve("10.0.0.4", "dave")).succeeded();
    for (let i = 0; i < 4; i++) await failed(l, "10.0.0.5", "dave"); // counted from zero again
    expect(await refusal(l, "10.0.0.6", "dave")).toBeUndefined();
  });

  test("an IPv6 client is counted by its /64: 20 failures from addresses of one /64 lock all of it, not the next /64", async () => {
    const l = new LoginThrottle(fakeClock().now);
    for (let i = 0; i < 20; i++) await failed(l, `2001:db8:1:2::${(i + 1).toString(16)}`, `user${i}`);
    expect((await refusal(l, "2001:db8:1:2:ffff::9", "someone"))?.code).toBe("TOO_MANY_REQUESTS");
    expect(await refusal(l, "2001:db8:1:3::1", "someone")).toBeUndefined();
  });

  test("40 logins at once for one username, the right password last: 5 are verified, the rest 429, the right one too", async () => {
    const l = new LoginThrottle(fakeClock().now);
    const answers = await Promise.all(
      Array.from({ length: 40 }, async (_, i) => {
        try {
          using attempt = await l.reserve(`10.0.1.${i}`, "admin");
          await Bun.sleep(2); // argon2
          if (i === 39) attempt.succeeded();
          else attempt.failed();
          return i === 39 ? 200 : 401;
        } catch (err) {
          return (err as AppError).status;
        }
      }),
    );
    expect(answers.filter((s) => s === 401)).toHaveLength(5);
    expect(answers.filter((s) => s === 429)).toHaveLength(35);
    expect(answers[39]).toBe(429);
    expect(l.failures).toBe(5);
  });
});
