/**
 * A receiver down, then up again, against the real server at its default
 * backoff (the first retry after 1-2 s, doubling): while it is down, events
 * keep coming and wait behind the first, which is tried less and less
 * often; once it is up, every event arrives, in the order of the changes,
 * each once or again with the same webhook-id, verified by
 * `standardwebhooks`. Down for a minute with BURROW_LONG_TESTS=1 (about
 * three minutes with the wait for the next attempt); every run has the
 * same path down for a few seconds.
 */
import { expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startServer } from "../harness/server.ts";
import { startReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

const LONG = Boolean(process.env.BURROW_LONG_TESTS);

/** The longest wait between two attempts after `ms` of failures at the default backoff: the next doubling. */
const nextWaitBound = (ms: number) => 2 * Math.max(2_000, ms);

async function outage(downMs: number, events: number) {
  // the default backoff and retry window: only private destinations are allowed, for a receiver on loopback
  await using server = await startServer({ args: ["--webhook-allow-private", "on"] });
  const api = await signedIn(server);
  await using receiver = startReceiver();
  const made = await api.post("/api/webhooks", { url: receiver.url, events: ["user.created"] });
  receiver.secrets.push(made.body.secret);
  const deliveries = async () => (await api.get(`/api/webhooks/${made.body.id}/deliveries?limit=1000`)).body as { status: string; attempts: number; next_attempt_at: string | null; error: string | null }[];

  await receiver.down();
  const downAt = Date.now();
  const names: string[] = [];
  for (let i = 0; i < events; i++) {
    names.push(`outage${i}`);
    expect((await api.post("/api/users", { username: `outage${i}`, password: "password-1234" })).status).toBe(201);
    await Bun.sleep(Math.max(0, downAt + ((i + 1) * downMs) / events - Date.now()));
  }
  await Bun.sleep(Math.max(0, downAt + downMs - Date.now()));

  // down: the first is retried, further and further apart; the rest wait behind it, untried
  const waiting = (await deliveries()).reverse();
  expect(waiting.map((d) => d.status)).toEqual(names.map(() => "pending"));
  const head = waiting[0]!;
  expect(head.attempts).toBeGreaterThanOrEqual(2);
  // a constant retry every second would have made downMs / 1000 attempts; doubling waits make about log2 of it
  expect(head.attempts).toBeLessThanOrEqual(Math.ceil(Math.log2(downMs / 1000)) + 3);
  expect(head.error).toBe("connection refused");
  expect(head.next_attempt_at).not.toBeNull();
  expect(waiting.slice(1).every((d) => d.attempts === 0)).toBe(true);

  receiver.up();
  const upAt = Date.now();
  // liveness only: the next attempt comes within the wait the backoff has reached, the rest right after it
  await waitUntil(() => new Set(receiver.received.map((r) => r.id)).size === events, 10 * nextWaitBound(downMs), "every event after the receiver came back");
  const firstArrival = receiver.received.map((r) => r.event.data.username as string).filter((u, i, all) => all.indexOf(u) === i);
  expect(firstArrival).toEqual(names);
  // at least once: a repeat is the same event with the same webhook-id
  for (const r of receiver.received) expect(r.id).toBe(r.event.id);
  expect(receiver.rejected).toEqual([]);
  await waitUntil(async () => (await deliveries()).every((d) => d.status === "delivered"), 10_000, "every delivery marked delivered");
  return { waitedMs: Date.now() - upAt, attempts: head.attempts };
}

test.skipIf(!LONG)(
  "down for a minute, then up: every event arrives, in order, at the default backoff",
  async () => {
    const { waitedMs, attempts } = await outage(60_000, 30);
    console.log(`receiver down 60 s: ${attempts} attempts of the first event while down; every event delivered ${(waitedMs / 1000).toFixed(1)} s after it came back`);
  },
  600_000,
);

test("down for a few seconds, then up: every event arrives, in order, at the default backoff", async () => {
  await outage(5_000, 10);
}, 120_000);
