/**
 * The store of pending DNS-01 values and the answer rate, on fake clocks:
 * values are added, removed and expire on their own; names are compared
 * case-insensitively; what is held is bounded. The answer rate's buckets
 * refill, the total caps every client together, memory stays bounded, and
 * IPv6 clients count by /64.
 */
import { describe, expect, test } from "bun:test";
import { CHALLENGE_TTL_MS, ChallengeRecords, MAX_CHALLENGE_NAMES } from "../../src/dns/challenge-records.ts";
import { clientKey } from "../../src/http/addresses.ts";
import { SourceRate, type SourceRateLimits } from "../../src/core/source-rate.ts";
import { MAX_TXT_VALUE_BYTES, MAX_TXT_VALUES } from "../../src/dns/wire.ts";

const NAME = "_acme-challenge.tunnels.example.com";
const VALUE = "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0"; // the shape of a real one: 43 characters of base64url

function fakeClock(start = 1_700_000_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => void (t += ms) };
}

describe("ChallengeRecords", () => {
  test("a value is served from when it is added until it is removed", () => {
    const records = new ChallengeRecords();
    expect(records.txt(NAME)).toEqual([]);
    expect(records.add(NAME, VALUE)).toBeUndefined();
    expect(records.txt(NAME)).toEqual([VALUE]);
    expect(records.remove(NAME, VALUE)).toBe(true);
    expect(records.txt(NAME)).toEqual([]);
    expect(records.remove(NAME, VALUE)).toBe(false);
    expect(records.size).toBe(0);
  });

  test("a domain and its wildcard hold two values under one name, oldest first; removing one leaves the other", () => {
    const records = new ChallengeRecords();
    records.add(NAME, "first");
    records.add(NAME, "second");
    expect(records.txt(NAME)).toEqual(["first", "second"]);
    records.remove(NAME, "first");
    expect(records.txt(NAME)).toEqual(["second"]);
  });

  test("names are compared without regard to ASCII case or a trailing dot", () => {
    const records = new ChallengeRecords();
    records.add("_ACME-Challenge.Tunnels.Example.COM.", VALUE);
    expect(records.txt(NAME)).toEqual([VALUE]);
    expect(records.txt("_acme-challenge.TUNNELS.example.com")).toEqual([VALUE]);
    expect(records.remove(`${NAME}.`, VALUE)).toBe(true);
  });

  test("a value expires on its own after the TTL, even if never removed", () => {
    const clock = fakeClock();
    const records = new ChallengeRecords(CHALLENGE_TTL_MS, clock.now);
    records.add(NAME, VALUE);
    clock.advance(CHALLENGE_TTL_MS - 1);
    expect(records.txt(NAME)).toEqual([VALUE]);
    clock.advance(1);
    expect(records.txt(NAME)).toEqual([]);
    expect(records.size).toBe(0);
    expect(records.remove(NAME, VALUE)).toBe(false);
  });

  test("adding a value held already restarts its time, and each value expires on its own", () => {
    const clock = fakeClock();
    const records = new ChallengeRecords(1000, clock.now);
    records.add(NAME, "a");
    clock.advance(600);
    records.add(NAME, "b");
    records.add(NAME, "a"); // restarted: both now expire 1000 ms from here
    clock.advance(999);
    expect(records.txt(NAME)).toEqual(["a", "b"]);
    clock.advance(1);
    expect(records.txt(NAME)).toEqual([]);
  });

  test("more than MAX_TXT_VALUES values for a name are refused; expired ones make room", () => {
    const clock = fakeClock();
    const records = new ChallengeRecords(1000, clock.now);
    for (let i = 0; i < MAX_TXT_VALUES; i++) expect(records.add(NAME, `v${i}`)).toBeUndefined();
    expect(records.add(NAME, "one-more")?.code).toBe("TOO_MANY_VALUES");
    expect(records.add(NAME, "v0")).toBeUndefined(); // held already: no new room needed
    clock.advance(1000);
    expect(records.add(NAME, "one-more")).toBeUndefined();
  });

  test("more than MAX_CHALLENGE_NAMES names are refused", () => {
    const records = new ChallengeRecords();
    for (let i = 0; i < MAX_CHALLENGE_NAMES; i++) expect(records.add(`_acme-challenge.d${i}.example.com`, VALUE)).toBeUndefined();
    expect(records.add("_acme-challenge.one-more.example.com", VALUE)?.code).toBe("TOO_MANY_NAMES");
    expect(records.add("_acme-challenge.d0.example.com", "another")).toBeUndefined(); // a name held already
  });

  test("names that are not DNS names and values that are not short printable ASCII are refused", () => {
    const records = new ChallengeRecords();
    for (const name of ["", ".", "a..b", "-a.example.com", "a b.example.com", "é.example.com", `${"a".repeat(64)}.example.com`]) {
      expect(records.add(name, VALUE)?.code).toBe("BAD_NAME");
    }
    for (const value of ["", "has space", "naïve", "a".repeat(MAX_TXT_VALUE_BYTES + 1), "line\nbreak"]) {
      expect(records.add(NAME, value)?.code).toBe("BAD_VALUE");
    }
    expect(records.add(NAME, "a".repeat(MAX_TXT_VALUE_BYTES))).toBeUndefined();
    expect(records.size).toBe(1);
  });
});

describe("SourceRate", () => {
  const LIMITS: SourceRateLimits = { perClientPerSecond: 10, perClientBurst: 20, totalPerSecond: 100, totalBurst: 50, maxClients: 3 };

  test("a client gets its burst at once, then its rate", () => {
    const clock = fakeClock();
    const rate = new SourceRate(LIMITS, clock.now);
    let granted = 0;
    for (let i = 0; i < 100; i++) if (rate.take("192.0.2.1")) granted++;
    expect(granted).toBe(20);
    clock.advance(500); // 5 tokens at 10 a second
    granted = 0;
    for (let i = 0; i < 100; i++) if (rate.take("192.0.2.1")) granted++;
    expect(granted).toBe(5);
    // another client has its own bucket
    expect(rate.take("192.0.2.2")).toBe(true);
  });

  test("the total caps every client together", () => {
    const clock = fakeClock();
    const rate = new SourceRate({ ...LIMITS, maxClients: 1000 }, clock.now);
    let granted = 0;
    for (let c = 0; c < 100; c++) for (let i = 0; i < 5; i++) if (rate.take(`198.51.100.${c}`)) granted++;
    expect(granted).toBe(50);
  });

  test("memory is bounded: past maxClients the least recently seen client is forgotten", () => {
    const rate = new SourceRate(LIMITS, fakeClock().now);
    for (let c = 0; c < 10; c++) rate.take(`203.0.113.${c}`);
    expect(rate.size).toBe(3);
  });

  test("IPv6 clients count by /64; IPv4-mapped addresses as IPv4", () => {
    expect(clientKey("2001:db8:1:2:aaaa::1")).toBe(clientKey("2001:db8:1:2:bbbb::2"));
    expect(clientKey("2001:db8:1:2::1")).not.toBe(clientKey("2001:db8:1:3::1"));
    expect(clientKey("::ffff:192.0.2.7")).toBe("192.0.2.7");
    expect(clientKey("192.0.2.7")).toBe("192.0.2.7");
    const clock = fakeClock();
    const rate = new SourceRate(LIMITS, clock.now);
    let granted = 0;
    for (let i = 0; i < 40; i++) if (rate.take(`2001:db8:1:2::${i.toString(16)}`)) granted++;
    expect(granted).toBe(20);
  });
});
