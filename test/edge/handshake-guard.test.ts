/**
 * The handshake guard's log on a fake clock: a throttled address costs one
 * line at once and then at most one a minute, carrying the count, however
 * many refusals it gets; a failure below the limit is not a refusal.
 */
import { expect, test } from "bun:test";
import { HandshakeGuard } from "../../src/edge/handshake-guard.ts";
import { captureConsole } from "../harness/console-lines.ts";

let t = 1_700_000_000_000;
const now = () => t;
const logged = captureConsole("log");

const throttledLines = () => logged.lines.filter((l) => l.includes("agent handshakes throttled"));

test("one line at the first refusal, then one a minute with the count since the last", () => {
  const guard = new HandshakeGuard(3, now);
  for (let i = 0; i < 3; i++) {
    expect(guard.refusal("192.0.2.1")).toBeUndefined();
    guard.failed("192.0.2.1", "AUTH_FAILED");
  }
  expect(guard.refusal("192.0.2.1")?.code).toBe("RATE_LIMITED");
  expect(throttledLines()).toHaveLength(1);
  expect(throttledLines()[0]).toMatch(/ address=192\.0\.2\.1 refused=1$/);

  for (let i = 0; i < 56; i++) guard.refusal("192.0.2.1");
  expect(throttledLines()).toHaveLength(1); // 57 refusals within the minute: still one line

  t += 30_000; // the first lock is over; one more failure locks the address for 60 s
  expect(guard.refusal("192.0.2.1")).toBeUndefined();
  guard.failed("192.0.2.1", "AUTH_FAILED");
  t += 30_000; // a minute after the first line: the next refusal carries the count
  guard.refusal("192.0.2.1");
  expect(throttledLines()).toHaveLength(2);
  expect(throttledLines()[1]).toMatch(/ address=192\.0\.2\.1 refused=57$/);

  // the rest of a minute is written by the sweep even when the flood stops
  t += 5_000;
  for (let i = 0; i < 4; i++) guard.refusal("192.0.2.1");
  t += 60_000;
  (guard as unknown as { sweep(): void }).sweep();
  expect(throttledLines()[2]).toMatch(/ address=192\.0\.2\.1 refused=4$/);
  // a quiet minute later the address is forgotten by the log (its lock lives on in the throttle)
  t += 60_000;
  (guard as unknown as { sweep(): void }).sweep();
  expect(throttledLines()).toHaveLength(3);
});

test("addresses are logged apart, and failures below the limit log no throttle line", () => {
  const guard = new HandshakeGuard(2, now);
  for (const a of ["192.0.2.10", "192.0.2.11"]) {
    guard.failed(a, "AUTH_FAILED");
    guard.failed(a, "TOKEN_DISABLED");
  }
  guard.failed("192.0.2.12", "AUTH_FAILED");
  expect(guard.refusal("192.0.2.12")).toBeUndefined();
  expect(throttledLines()).toEqual([]);
  guard.refusal("192.0.2.10");
  guard.refusal("192.0.2.11");
  guard.refusal("192.0.2.11");
  expect(throttledLines().map((l) => l.split(" ").slice(-2).join(" "))).toEqual(["address=192.0.2.10 refused=1", "address=192.0.2.11 refused=1"]);
});
