/**
 * Standard Webhooks signatures: burrow's are the reference library's,
 * byte for byte; a secret rotated with an overlap signs with both (two
 * space-separated signatures, each verifying with its own secret in the
 * `standardwebhooks` package), and after the overlap with the new one only.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Webhook } from "standardwebhooks";
import { createCore, type Core } from "../../src/core/index.ts";
import { isWebhookSecret, newWebhookSecret, signature, signedHeaders } from "../../src/core/events/signing.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { DeliveryWorker, DEFAULT_WORKER_LIMITS } from "../../src/webhooks/worker.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

describe("a signature", () => {
  test("is the reference library's for the same message, secret and time", () => {
    const secret = newWebhookSecret();
    expect(isWebhookSecret(secret)).toBe(true);
    const body = JSON.stringify({ type: "user.created", data: { username: "zoë" } });
    const at = new Date(1_790_000_000_000);
    expect(signature(secret, "evt_1", 1_790_000_000, body)).toBe(new Webhook(secret).sign("evt_1", at, body));
  });

  test("several are space-separated and each verifies alone; a changed byte fails them all", () => {
    const [a, b] = [newWebhookSecret(), newWebhookSecret()];
    const body = '{"n":1}';
    const ts = Math.floor(Date.now() / 1000);
    const headers = signedHeaders([a, b], "evt_2", ts, body);
    expect(headers["webhook-signature"]!.split(" ")).toHaveLength(2);
    expect(new Webhook(a).verify(body, headers)).toEqual({ n: 1 });
    expect(new Webhook(b).verify(body, headers)).toEqual({ n: 1 });
    expect(() => new Webhook(a).verify('{"n":2}', headers)).toThrow();
    expect(() => new Webhook(newWebhookSecret()).verify(body, headers)).toThrow();
  });

  test("secrets of another form are refused", () => {
    for (const s of ["", "whsec_", "whsec_short", "sk_" + Buffer.alloc(32).toString("base64"), "whsec_" + Buffer.alloc(100).toString("base64")]) expect(isWebhookSecret(s)).toBe(false);
  });
});

describe("a rotation", () => {
  let dir: string;
  let database: OpenedDb;
  let core: Core;
  let receiver: WebhookReceiver;
  let worker: DeliveryWorker;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), "burrow-signing-"));
    database = openDatabase(dir);
    core = createCore({ store: database.store, systemSubdomains: [], webhookLimits: { maxWebhooks: 10, perUser: 2, retryWindowMs: 60_000, allowPrivate: true } });
    receiver = startReceiver();
    worker = new DeliveryWorker(database.store, "local", { ...DEFAULT_WORKER_LIMITS, allowPrivate: true });
    worker.start(core.events);
  });
  afterEach(async () => {
    await worker.stop();
    await receiver.stop();
    database.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test("with an overlap, both secrets sign; after it, the new one alone", async () => {
    const { webhook, secret: old } = await core.webhooks.create({ url: receiver.url, events: ["user.*"] });
    const { secret: fresh } = await core.webhooks.rotate(webhook.id, 2, undefined);
    expect(fresh).not.toBe(old);
    receiver.secrets.push(old, fresh);
    await core.users.create({ username: "during", password: "password-1234" });
    await waitUntil(() => receiver.received.length === 1, 10_000, "the delivery during the overlap");
    expect(receiver.received[0]!.verifiedBy).toEqual([0, 1]);
    expect(receiver.received[0]!.signature.split(" ")).toHaveLength(2);
    await Bun.sleep(2_100); // the overlap ends
    await core.users.create({ username: "after", password: "password-1234" });
    await waitUntil(() => receiver.received.length === 2, 10_000, "the delivery after it");
    expect(receiver.received[1]!.verifiedBy).toEqual([1]);
  });

  test("without an overlap, the old secret stops at once", async () => {
    const { webhook, secret: old } = await core.webhooks.create({ url: receiver.url, events: ["user.*"] });
    const { secret: fresh } = await core.webhooks.rotate(webhook.id, 0, undefined);
    receiver.secrets.push(old, fresh);
    await core.users.create({ username: "now", password: "password-1234" });
    await waitUntil(() => receiver.received.length === 1, 10_000, "the delivery");
    expect(receiver.received[0]!.verifiedBy).toEqual([1]);
  });
});
