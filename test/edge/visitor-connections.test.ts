import { expect, test } from "bun:test";
import { VisitorConnections } from "../../src/edge/visitor-connections.ts";

function budget(kernel: Set<string> | undefined = undefined) {
  let now = 1_000_000;
  const peers = { open: kernel };
  const b = new VisitorConnections({ perAddress: 2, total: 3, idleTimeoutS: 10 }, () => 8080, () => 0, () => now, () => peers.open);
  return { b, peers, advance: (ms: number) => (now += ms) };
}

test("a connection counts from its first request; more requests on it are not new connections", () => {
  const { b } = budget();
  const first = b.begin("1.1.1.1", 1000, "1.1.1.1");
  expect(first.ok).toBe(true);
  if (first.ok) b.end(first.key);
  expect(b.begin("1.1.1.1", 1000, "1.1.1.1").ok).toBe(true);
  expect(b.countFor("1.1.1.1")).toBe(1);
});

test("past the per-address cap a new connection is refused as 'address', past the total as 'total'", () => {
  const { b } = budget();
  b.begin("1.1.1.1", 1, "1.1.1.1");
  b.begin("1.1.1.1", 2, "1.1.1.1");
  expect(b.begin("1.1.1.1", 3, "1.1.1.1")).toEqual({ ok: false, why: "address" });
  b.begin("2.2.2.2", 1, "2.2.2.2");
  expect(b.begin("3.3.3.3", 1, "3.3.3.3")).toEqual({ ok: false, why: "total" });
});

test("idle connections expire after the idle timeout; one with a request in flight never does", () => {
  const { b, advance } = budget();
  const a = b.begin("1.1.1.1", 1, "1.1.1.1");
  b.begin("1.1.1.1", 2, "1.1.1.1"); // in flight for ever
  if (a.ok) b.end(a.key);
  advance(12_000);
  b.expire();
  expect(b.total).toBe(1);
});

test("closedIdle forgets exactly the connections without a request in flight", () => {
  const { b } = budget();
  const a = b.begin("1.1.1.1", 1, "1.1.1.1");
  b.begin("2.2.2.2", 1, "2.2.2.2");
  if (a.ok) b.end(a.key);
  b.closedIdle();
  expect(b.countFor("1.1.1.1")).toBe(0);
  expect(b.countFor("2.2.2.2")).toBe(1);
});

test("before refusing, the kernel's list of open connections replaces what was only assumed open", () => {
  const { b, peers } = budget(new Set(["1.1.1.1:2"]));
  b.begin("1.1.1.1", 1, "1.1.1.1");
  b.begin("1.1.1.1", 2, "1.1.1.1");
  // port 1 closed without a word: the kernel no longer lists it
  expect(b.begin("1.1.1.1", 3, "1.1.1.1").ok).toBe(true);
  expect(b.countFor("1.1.1.1")).toBe(2);
  peers.open = new Set(["1.1.1.1:2", "1.1.1.1:3"]);
  expect(b.begin("1.1.1.1", 4, "1.1.1.1").ok).toBe(false);
});

test("IPv4-mapped peers count as their IPv4 address", () => {
  const { b } = budget(new Set(["1.1.1.1:1", "1.1.1.1:2"]));
  b.begin("::ffff:1.1.1.1", 1, "1.1.1.1");
  b.begin("1.1.1.1", 2, "1.1.1.1");
  expect(b.begin("::ffff:1.1.1.1", 3, "1.1.1.1")).toEqual({ ok: false, why: "address" });
});
