/**
 * Alerts and the events around them, in this process on a real database
 * with the delivery worker and a receiver verifying each delivery: a
 * certificate near its end whose renewal failed (certificate.expiring and
 * alert.certificate_renewal_failing, once a day), the renewal's results
 * (certificate.issued, certificate.failed), descriptor pressure, the
 * outbox backing up (at most hourly), a node swept as dead; and
 * --alert-webhook's own row on the real server, which takes alerts only.
 */
import { afterEach, beforeEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore, type Core } from "../../src/core/index.ts";
import { newWebhookSecret } from "../../src/core/events/signing.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { Alerts, type AlertOptions, type CertificateSeen } from "../../src/webhooks/alerts.ts";
import { DeliveryWorker, DEFAULT_WORKER_LIMITS } from "../../src/webhooks/worker.ts";
import { signedIn } from "../harness/admin.ts";
import { startServer } from "../harness/server.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

const DAY = 86_400_000;
let dir: string;
let database: OpenedDb;
let core: Core;
let receiver: WebhookReceiver;
let worker: DeliveryWorker;
let alerts: Alerts | undefined;

beforeEach(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-alerts-"));
  database = openDatabase(dir);
  core = createCore({ store: database.store, systemSubdomains: [], webhookLimits: { maxWebhooks: 10, perUser: 1, retryWindowMs: 60_000, allowPrivate: true } });
  receiver = startReceiver();
  const { secret } = await core.webhooks.create({ url: receiver.url, events: ["*"] });
  receiver.secrets.push(secret);
  worker = new DeliveryWorker(database.store, "local", { ...DEFAULT_WORKER_LIMITS, allowPrivate: true });
  worker.start(core.events);
});
afterEach(async () => {
  alerts?.stop();
  await core.events.stop();
  await worker.stop();
  await receiver.stop();
  database.close();
  rmSync(dir, { recursive: true, force: true });
});

function startAlerts(opts: Partial<AlertOptions>): Alerts {
  alerts = new Alerts(core, { node: "local", outboxPending: 1000, pending: () => 0, post: { timeoutMs: 1000, maxResponseBytes: 1024, allowPrivate: true }, direct: false, descriptors: () => ({ open: 10, limit: 1000 }), ...opts });
  alerts.start();
  return alerts;
}

const of = (type: string) => receiver.received.filter((r) => r.event.type === type).map((r) => r.event.data as Record<string, any>);

describe("certificates", () => {
  test("one near its end whose renewal failed: expiring and the alert; a healthy far one: nothing", async () => {
    const soon = new Date(Date.now() + 9 * DAY + 3_600_000).toISOString();
    const certs: CertificateSeen[] = [
      { id: "*.t.example.com", names: ["*.t.example.com", "t.example.com"], not_after: soon, last_error: { code: "CHALLENGE_FAILED", message: "no TXT" } },
      { id: "far.t.example.com", names: ["far.t.example.com"], not_after: new Date(Date.now() + 60 * DAY).toISOString(), last_error: null },
    ];
    startAlerts({ certificates: () => certs });
    await waitUntil(() => of("alert.certificate_renewal_failing").length === 1, 10_000, "the alert");
    expect(of("certificate.expiring")).toEqual([{ names: ["*.t.example.com", "t.example.com"], not_after: soon, days_left: 9 }]);
    expect(of("alert.certificate_renewal_failing")[0]).toMatchObject({ severity: "critical", code: "CHALLENGE_FAILED", names: ["*.t.example.com", "t.example.com"] });
    expect(of("alert.certificate_renewal_failing")[0]!.message).toContain("ends in 9 days and its renewal failed: CHALLENGE_FAILED");
    // looked at again the same day: said once (the database's dedupe, whichever node looks)
    alerts!.stop();
    startAlerts({ certificates: () => certs });
    await Bun.sleep(800);
    expect(of("certificate.expiring")).toHaveLength(1);
  });

  test("the renewal's results are certificate.issued and certificate.failed", async () => {
    const a = startAlerts({});
    a.certificateResult({ names: ["x.t.example.com"], ok: true, notAfter: new Date("2027-01-01T00:00:00Z") });
    a.certificateResult({ names: ["y.t.example.com"], ok: false, code: "CA_ERROR", message: "the CA said no", notAfter: null });
    await waitUntil(() => of("certificate.failed").length === 1, 10_000, "both");
    expect(of("certificate.issued")).toEqual([{ names: ["x.t.example.com"], not_after: "2027-01-01T00:00:00.000Z" }]);
    expect(of("certificate.failed")).toEqual([{ names: ["y.t.example.com"], code: "CA_ERROR", message: "the CA said no", not_after: null }]);
  });
});

test("descriptors past 80 % of the limit: one alert an hour", async () => {
  let open = 100;
  startAlerts({ descriptors: () => ({ open, limit: 1000 }) });
  await Bun.sleep(300);
  open = 850;
  alerts!.stop();
  startAlerts({ descriptors: () => ({ open, limit: 1000 }) });
  await waitUntil(() => of("alert.descriptor_pressure").length === 1, 10_000, "the alert");
  expect(of("alert.descriptor_pressure")[0]).toMatchObject({ open: 850, limit: 1000, severity: "warning", message: "open files at 85 % of the limit (850 of 1000): raise LimitNOFILE or add a node" });
});

test("the outbox backing up past --alert-outbox-pending: the alert; a node swept: node.down and its alert", async () => {
  const a = startAlerts({ outboxPending: 5, pending: () => 6 });
  await waitUntil(() => of("alert.outbox_backing_up").length === 1, 10_000, "the outbox alert");
  expect(of("alert.outbox_backing_up")[0]).toMatchObject({ pending: 6, threshold: 5 });
  a.nodeDown("edge-2", new Date("2026-07-01T12:00:00Z"));
  await waitUntil(() => of("alert.node_down").length === 1, 10_000, "the node alert");
  expect(of("node.down")).toEqual([{ node: "edge-2", last_heartbeat: "2026-07-01T12:00:00.000Z" }]);
});

test("--alert-webhook: the server's own row, alerts only, signed with BURROW_ALERT_WEBHOOK_SECRET; the outbox backing up reaches it", async () => {
  const secret = newWebhookSecret();
  await using alertReceiver = startReceiver([secret]);
  await using down = startReceiver();
  await using server = await startServer({
    args: ["--webhook-allow-private", "on", "--alert-webhook", alertReceiver.url, "--alert-outbox-pending", "2", "--webhook-backoff-max", "1"],
    env: { BURROW_ALERT_WEBHOOK_SECRET: secret },
  });
  const api = await signedIn(server);
  const rows = (await api.get("/api/webhooks")).body;
  expect(rows).toEqual([expect.objectContaining({ url: alertReceiver.url, origin: "flag", events: expect.arrayContaining(["alert.outbox_backing_up", "alert.node_down"]) })]);
  const made = await api.post("/api/webhooks", { url: down.url, events: ["user.*"] });
  down.secrets.push(made.body.secret);
  await down.down();
  for (let i = 0; i < 4; i++) await api.createUser(`waiting${i}`);
  await waitUntil(() => alertReceiver.received.length >= 1, 30_000, "the outbox alert");
  expect(alertReceiver.received.map((r) => r.event.type)).toEqual(["alert.outbox_backing_up"]);
  expect(alertReceiver.received[0]!.verifiedBy).toEqual([0]);
  expect(server.output.text()).not.toContain(secret);
});
