/**
 * The outbox and its delivery worker, in this process on a real SQLite
 * database, delivering to a real receiver on loopback that verifies each
 * delivery with the `standardwebhooks` package: an event is written in the
 * transaction of its change (a change rolled back leaves none), deliveries
 * go out signed, in order, at least once, after a receiver's outage too;
 * an attempt that fails is tried again with backoff until the retry
 * window ends, then failed and redeliverable; a webhook's waiting
 * deliveries are capped, the oldest dropped and counted; redirects are not
 * followed, answers are read within their cap, a hanging receiver is given
 * up on, and private destinations are refused unless allowed.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore, type Core } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { DeliveryWorker, DEFAULT_WORKER_LIMITS, type WorkerLimits } from "../../src/webhooks/worker.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

let dir: string;
let database: OpenedDb;
let core: Core;
let receiver: WebhookReceiver;
const workers: DeliveryWorker[] = [];

function startCore(retryWindowMs = 60_000) {
  core = createCore({ store: database.store, systemSubdomains: [], outbox: { retryWindowMs, queueMax: 1000 }, webhookLimits: { maxWebhooks: 10, perUser: 2, retryWindowMs, allowPrivate: true } });
}

function startWorker(limits: Partial<WorkerLimits> = {}, node = "local"): DeliveryWorker {
  const w = new DeliveryWorker(database.store, node, { ...DEFAULT_WORKER_LIMITS, allowPrivate: true, backoffMaxMs: 300, timeoutMs: 2_000, ...limits });
  w.start(core.events);
  workers.push(w);
  return w;
}

async function hook(events: string[] = ["*"]) {
  const { webhook, secret } = await core.webhooks.create({ url: receiver.url, events });
  receiver.secrets.push(secret);
  return webhook;
}

const usernames = () => receiver.received.map((r) => (r.event.data as { username: string }).username);
const types = () => receiver.received.map((r) => `${r.event.type} ${(r.event.data as { username?: string }).username}`);
const last = async (id: number) => (await core.webhooks.deliveries(id, { limit: 1 }, undefined))[0];

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), "burrow-outbox-"));
  database = openDatabase(dir);
  startCore();
  receiver = startReceiver();
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  await receiver.stop();
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

describe("the outbox", () => {
  test("an event is written in the transaction of its change: a change rolled back leaves no event", async () => {
    await hook();
    await core.users.create({ username: "alice", password: "password-1234" });
    // a second alice fails in its transaction: no user, no event
    await expect(core.users.create({ username: "ALICE", password: "password-1234" })).rejects.toThrow("taken");
    // a change whose transaction throws after its event: neither stays
    await expect(
      core.store.transaction(async () => {
        await core.events.emit({ type: "user.created", data: { user_id: 99, username: "ghost", role: "user" } });
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    const rows = await core.store.all(core.store.db.select().from(core.store.tables.events));
    expect(rows.map((r) => r.type)).toEqual(["user.created"]);
    expect(JSON.parse(rows[0]!.data)).toMatchObject({ username: "alice" });
  });

  test("no webhook, no row: an event nobody wants is not written", async () => {
    await core.users.create({ username: "bob", password: "password-1234" });
    expect(await core.store.all(core.store.db.select().from(core.store.tables.events))).toEqual([]);
  });

  test("a webhook gets only the types it names", async () => {
    await hook(["token.*"]);
    startWorker();
    const u = await core.users.create({ username: "carol", password: "password-1234" });
    await core.tokens.generate(u.id, "laptop");
    await waitUntil(() => receiver.received.length >= 1, 10_000, "the token's event");
    await Bun.sleep(300); // nothing else comes
    expect(types()).toEqual(["token.created carol"]);
  });
});

describe("delivery", () => {
  test("each delivery verifies with standardwebhooks; a body with one byte changed does not", async () => {
    await hook();
    startWorker();
    await core.users.create({ username: "dave", password: "password-1234" });
    await waitUntil(() => receiver.received.length === 1, 10_000, "the delivery");
    const got = receiver.received[0]!;
    expect(got.event).toMatchObject({ type: "user.created", data: { username: "dave", role: "user" } });
    expect(got.id).toBe(got.event.id);
    expect(got.id).toMatch(/^evt_/);
    expect(Math.abs(Number(got.timestamp) - Date.now() / 1000)).toBeLessThan(60);
    // the same request with one byte of the body changed, sent again: the receiver's library refuses it
    const tampered = got.body.replace("dave", "davf");
    const res = await fetch(receiver.url, { method: "POST", body: tampered, headers: { "webhook-id": got.id, "webhook-timestamp": got.timestamp, "webhook-signature": got.signature } });
    expect(res.status).toBe(400);
    expect(receiver.rejected).toEqual([tampered]);
  });

  test("the receiver down, then up: every event arrives, in order, each with its own id", async () => {
    const w = await hook();
    await receiver.down();
    startWorker();
    for (let i = 0; i < 12; i++) await core.users.create({ username: `user${i}`, password: "password-1234" });
    // attempts fail while it is down
    await waitUntil(async () => ((await core.webhooks.deliveries(w.id, { limit: 100 }, undefined)).at(-1)?.attempts ?? 0) >= 2, 10_000, "failed attempts");
    receiver.up();
    await waitUntil(() => new Set(receiver.received.map((r) => r.id)).size === 12, 20_000, "every event");
    const order = usernames();
    // at least once: a repeat keeps its id, and the first arrivals are in the order of the changes
    expect(order.filter((u, i) => order.indexOf(u) === i)).toEqual(Array.from({ length: 12 }, (_, i) => `user${i}`));
    // the receiver has each event a moment before the worker hears its answer and marks the delivery
    await waitUntil(async () => (await core.webhooks.deliveries(w.id, { limit: 100 }, undefined)).every((d) => d.status === "delivered"), 10_000, "every delivery marked delivered");
  });

  test("an attempt that fails is tried again with backoff until the retry window ends, then failed; a retry delivers it", async () => {
    startCore(1_500);
    const w = await hook();
    receiver.mode = "error";
    startWorker();
    await core.users.create({ username: "erin", password: "password-1234" });
    await waitUntil(async () => (await last(w.id))?.status === "failed", 15_000, "the delivery failed");
    const failed = (await last(w.id))!;
    expect(failed.attempts).toBeGreaterThanOrEqual(2);
    expect(failed.responseStatus).toBe(503);
    expect(failed.error).toBe("answered 503");
    expect(failed.nextAttemptMs).toBeNull();
    // the next event goes out once the first has failed (one at a time, in order)
    receiver.mode = "ok";
    await core.users.create({ username: "frank", password: "password-1234" });
    await waitUntil(() => receiver.received.length === 1, 10_000, "the next event");
    expect(types()).toEqual(["user.created frank"]);
    const again = await core.webhooks.retry(w.id, failed.id, undefined);
    expect(again.status).toBe("pending");
    await waitUntil(() => receiver.received.length === 2, 10_000, "the retried delivery");
    expect(types()).toEqual(["user.created frank", "user.created erin"]);
    expect(receiver.received[1]!.id).toBe(failed.eventUid);
  });

  test("a webhook's waiting deliveries are capped: the oldest are dropped and counted, and the drop is said last (webhook.dropped)", async () => {
    const w = await hook();
    await receiver.down();
    for (let i = 0; i < 15; i++) await core.users.create({ username: `capped${i}`, password: "password-1234" });
    const worker = startWorker({ maxPending: 10 });
    // ten waiting at most, the notice of the drop among them: six dropped
    await waitUntil(async () => (await core.webhooks.get(w.id, undefined)).dropped === 6, 10_000, "six dropped");
    expect(worker.stats.dropped).toBe(6);
    const dropped = (await core.webhooks.deliveries(w.id, { limit: 100, status: "dropped" }, undefined)).map((d) => d.id).sort((a, b) => a - b);
    expect(dropped).toEqual([1, 2, 3, 4, 5, 6]);
    expect((await core.webhooks.get(w.id, undefined)).pending).toBe(10);
    receiver.up();
    await waitUntil(() => receiver.received.some((r) => r.event.type === "webhook.dropped"), 20_000, "the kept ones and the notice");
    const seen = receiver.received.filter((r, i, all) => all.findIndex((x) => x.id === r.id) === i).map((r) => r.event);
    expect(seen.map((e) => (e.type === "webhook.dropped" ? e.type : e.data.username))).toEqual([...Array.from({ length: 9 }, (_, i) => `capped${i + 6}`), "webhook.dropped"]);
    const notice = seen.at(-1)!.data;
    const all = (await core.webhooks.deliveries(w.id, { limit: 100 }, undefined)).sort((a, b) => a.id - b.id);
    expect(notice).toEqual({ webhook_id: w.id, user_id: null, dropped: 6, dropped_total: 6, max_pending: 10, from: all[0]!.eventAt, to: all[5]!.eventAt });
    // no churn: with the notice in its place, the next looks drop nothing more
    await Bun.sleep(6_000);
    expect((await core.webhooks.get(w.id, undefined)).dropped).toBe(6);
  }, 40_000);
});

describe("where and how it is sent", () => {
  test("a redirect is not followed: the attempt fails, naming it", async () => {
    const w = await hook();
    receiver.mode = "redirect";
    startWorker();
    await core.users.create({ username: "gina", password: "password-1234" });
    await waitUntil(async () => (await last(w.id))?.error != null, 10_000, "the attempt");
    const d = (await last(w.id))!;
    expect(d.error).toBe("redirect (307) not followed");
    expect(d.status).toBe("pending");
    expect(receiver.rejected).toEqual([]); // the redirect's target was never asked (it would refuse: no signature there)
  });

  test("a hanging receiver is given up on after --webhook-timeout; a huge answer is read no further than the cap", async () => {
    const w = await hook();
    receiver.mode = "hang";
    startWorker({ timeoutMs: 500, maxResponseBytes: 1024 });
    await core.users.create({ username: "hank", password: "password-1234" });
    await waitUntil(async () => (await last(w.id))?.error != null, 10_000, "the attempt");
    const d = (await last(w.id))!;
    expect(d.error).toBe("no answer within 0.5 s");
    expect(d.durationMs!).toBeLessThan(5_000);
    receiver.mode = "huge";
    await waitUntil(async () => (await last(w.id))?.status === "delivered", 10_000, "delivered");
  });

  test("loopback is refused without --webhook-allow-private, and the refusal says why", async () => {
    const w = await hook();
    startWorker({ allowPrivate: false });
    await core.users.create({ username: "ivy", password: "password-1234" });
    await waitUntil(async () => (await last(w.id))?.error != null, 10_000, "the attempt");
    expect((await last(w.id))!.error).toContain("127.0.0.1 is 127.0.0.1, not a public address: refused");
    expect(receiver.requests).toBe(0);
  });
});

describe("two workers on one database", () => {
  test("a webhook is delivered by one at a time: every event once, in order", async () => {
    await hook();
    startWorker({}, "a");
    startWorker({}, "b");
    for (let i = 0; i < 20; i++) await core.users.create({ username: `pair${i}`, password: "password-1234" });
    await waitUntil(() => receiver.received.length === 20, 20_000, "every event");
    await Bun.sleep(300);
    expect(usernames()).toEqual(Array.from({ length: 20 }, (_, i) => `pair${i}`));
  });
});
