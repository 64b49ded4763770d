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

/** A handshake from `address` that ends with `code`. */
async function failed(guard: HandshakeGuard, address: string, code: string): Promise<void> {
  const r = await guard.reserve(address);
  if (!r.ticket) throw new Error(`refused: ${r.refusal.message}`);
  r.ticket.ended(code);
}

/** The refusal of a HELLO from `address`, or undefined (the place it was given is handed back). */
async function refusal(guard: HandshakeGuard, address: string) {
  const r = await guard.reserve(address);
  r.ticket?.[Symbol.dispose]();
  return r.refusal;
}

const throttledLines = () => logged.lines.filter((l) => l.includes("agent handshakes throttled"));

test("one line at the first refusal, then one a minute with the count since the last", async () => {
  const guard = new HandshakeGuard(3, now);
  for (let i = 0; i < 3; i++) {
    expect(await refusal(guard, "192.0.2.1")).toBeUndefined();
    await failed(guard, "192.0.2.1", "AUTH_FAILED");
  }
  expect((await refusal(guard, "192.0.2.1"))?.code).toBe("RATE_LIMITED");
  expect(throttledLines()).toHaveLength(1);
  expect(throttledLines()[0]).toMatch(/ address=192\.0\.2\.1 refused=1$/);

  for (let i = 0; i < 56; i++) await refusal(guard, "192.0.2.1");
  expect(throttledLines()).toHaveLength(1); // 57 refusals within the minute: still one line

  t += 30_000; // the first lock is over; one more failure locks the address for 60 s
  expect(await refusal(guard, "192.0.2.1")).toBeUndefined();
  await failed(guard, "192.0.2.1", "AUTH_FAILED");
  t += 30_000; // a minute after the first line: the next refusal carries the count
  await refusal(guard, "192.0.2.1");
  expect(throttledLines()).toHaveLength(2);
  expect(throttledLines()[1]).toMatch(/ address=192\.0\.2\.1 refused=57$/);

  // the rest of a minute is written by the sweep even when the flood stops
  t += 5_000;
  for (let i = 0; i < 4; i++) await refusal(guard, "192.0.2.1");
  t += 60_000;
  (guard as unknown as { sweep(): void }).sweep();
  expect(throttledLines()[2]).toMatch(/ address=192\.0\.2\.1 refused=4$/);
  // a quiet minute later the address is forgotten by the log (its lock lives on in the throttle)
  t += 60_000;
  (guard as unknown as { sweep(): void }).sweep();
  expect(throttledLines()).toHaveLength(3);
});

test("addresses are logged apart, and failures below the limit log no throttle line", async () => {
  const guard = new HandshakeGuard(2, now);
  for (const a of ["192.0.2.10", "192.0.2.11"]) {
    await failed(guard, a, "AUTH_FAILED");
    await failed(guard, a, "TOKEN_DISABLED");
  }
  await failed(guard, "192.0.2.12", "AUTH_FAILED");
  expect(await refusal(guard, "192.0.2.12")).toBeUndefined();
  expect(throttledLines()).toEqual([]);
  await refusal(guard, "192.0.2.10");
  await refusal(guard, "192.0.2.11");
  await refusal(guard, "192.0.2.11");
  expect(throttledLines().map((l) => l.split(" ").slice(-2).join(" "))).toEqual(["address=192.0.2.10 refused=1", "address=192.0.2.11 refused=1"]);
});
