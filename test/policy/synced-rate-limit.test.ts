/**
 * The rate-limit counts a cluster's nodes share (SyncedRateLimitStore):
 * each node answers from its own counts at once, hands over what it
 * counted since it last said, and adds the others' deltas; between syncs
 * the cluster may let through what one node counted since the last one,
 * never more once they have spoken. And the deltas as they travel between
 * nodes are read without trusting them (readDeltas).
 */
import { describe, expect, test } from "bun:test";
import { readDeltas } from "../../src/cluster/rate-limit-sync.ts";
import { bucketDigest, SyncedRateLimitStore } from "../../src/policy/synced-rate-limit-store.ts";

const MINUTE = 60_000;
const T0 = 1_700_000_040_000; // the start of a minute
const sync = (from: SyncedRateLimitStore, to: SyncedRateLimitStore, now: number) => to.addRemote(from.takeDeltas(1000), now);

describe("two nodes' counts", () => {
  test("each node's requests count on the other after a sync: the capacity holds over both", () => {
    const a = new SyncedRateLimitStore();
    const b = new SyncedRateLimitStore();
    for (let i = 0; i < 6; i++) expect(a.hit("k", 10, MINUTE, T0 + i).limited).toBe(false);
    sync(a, b, T0 + 10);
    const seen = [];
    for (let i = 0; i < 6; i++) seen.push(b.hit("k", 10, MINUTE, T0 + 20 + i).limited);
    expect(seen).toEqual([false, false, false, false, true, true]);
    sync(b, a, T0 + 30);
    expect(a.hit("k", 10, MINUTE, T0 + 40).limited).toBe(true);
  });

  test("between syncs each node answers from what it knows: the overshoot is what the other counted since the last sync", () => {
    const a = new SyncedRateLimitStore();
    const b = new SyncedRateLimitStore();
    let passed = 0;
    for (let i = 0; i < 10; i++) if (!a.hit("k", 10, MINUTE, T0 + i).limited) passed++;
    for (let i = 0; i < 10; i++) if (!b.hit("k", 10, MINUTE, T0 + i).limited) passed++;
    expect(passed).toBe(20);
    sync(a, b, T0 + 20);
    sync(b, a, T0 + 20);
    expect(a.hit("k", 10, MINUTE, T0 + 30).limited).toBe(true);
    expect(b.hit("k", 10, MINUTE, T0 + 30).limited).toBe(true);
  });

  test("a delta is told once; a window that ended before it was told goes out still, for that window", () => {
    const a = new SyncedRateLimitStore();
    a.hit("k", 10, MINUTE, T0);
    a.hit("k", 10, MINUTE, T0 + MINUTE + 5);
    const deltas = a.takeDeltas(10);
    expect(deltas).toEqual(
      expect.arrayContaining([
        [bucketDigest("k"), T0, MINUTE, 1],
        [bucketDigest("k"), T0 + MINUTE, MINUTE, 1],
      ]),
    );
    expect(a.takeDeltas(10)).toEqual([]);
  });

  test("the previous window's deltas weigh as the sliding window says; ones from long ago count for nothing", () => {
    const b = new SyncedRateLimitStore();
    b.addRemote([[bucketDigest("k"), T0, MINUTE, 10]], T0 + MINUTE + MINUTE / 2);
    // half the previous window still overlaps: 10 * 0.5 = 5 of 10 used
    const seen = [];
    for (let i = 0; i < 6; i++) seen.push(b.hit("k", 10, MINUTE, T0 + MINUTE + MINUTE / 2).limited);
    expect(seen).toEqual([false, false, false, false, false, true]);
    const c = new SyncedRateLimitStore();
    c.addRemote([[bucketDigest("k"), T0 - 5 * MINUTE, MINUTE, 1000]], T0);
    expect(c.hit("k", 10, MINUTE, T0).limited).toBe(false);
  });

  test("at most `max` buckets are told at once; the rest wait for the next time", () => {
    const a = new SyncedRateLimitStore();
    for (let i = 0; i < 25; i++) a.hit(`k${i}`, 10, MINUTE, T0);
    expect(a.takeDeltas(10)).toHaveLength(10);
    expect(a.takeDeltas(10)).toHaveLength(10);
    expect(a.takeDeltas(10)).toHaveLength(5);
  });

  test("buckets are bounded: past the cap the least recently used is forgotten, heard ones too", () => {
    const a = new SyncedRateLimitStore(1000);
    a.addRemote(Array.from({ length: 5000 }, (_, i) => [bucketDigest(`r${i}`), T0, MINUTE, 1] as [string, number, number, number]), T0);
    expect(a.size).toBe(1000);
  });
});

describe("deltas between nodes, read without trusting them", () => {
  const good = [bucketDigest("k"), T0, MINUTE, 3];
  test("another node's are read; this node's own are not", () => {
    expect(readDeltas(JSON.stringify({ f: "n2", d: [good] }), "n1")).toEqual([good as never]);
    expect(readDeltas(JSON.stringify({ f: "n1", d: [good] }), "n1")).toBeUndefined();
  });

  test("a payload of another shape is dropped whole", () => {
    for (const bad of [
      "not json",
      JSON.stringify({ f: "n2" }),
      JSON.stringify({ f: "n2", d: [[...good, 1]] }),
      JSON.stringify({ f: "n2", d: [["short", T0, MINUTE, 1]] }),
      JSON.stringify({ f: "n2", d: [[good[0], T0 + 1, MINUTE, 1]] }),
      JSON.stringify({ f: "n2", d: [[good[0], T0, 10, 1]] }),
      JSON.stringify({ f: "n2", d: [[good[0], T0, MINUTE, -5]] }),
      JSON.stringify({ f: "n2", d: [good, [good[0], T0, MINUTE, 1e12]] }),
    ]) {
      expect(readDeltas(bad, "n1")).toBeUndefined();
    }
  });
});
