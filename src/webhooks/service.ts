/**
 * Webhooks on a running server: the delivery worker (worker.ts), finished
 * deliveries pruned after --webhook-history days, and the --alert-webhook
 * row kept as the flags say. server.ts starts it after the database and
 * the cluster, and stops it before the database closes.
 */
import type { EventsConfig } from "./settings.ts";
import type { Core } from "../core/index.ts";
import { ALERT_EVENTS } from "../core/events/alerts.ts";
import { logFailedWrite } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { DeliveryWorker } from "./worker.ts";
import { Alerts, type CertificateSeen } from "./alerts.ts";

const PRUNE_EVERY_MS = 60 * 60 * 1000;

export interface RunningWebhooks {
  worker: DeliveryWorker;
  alerts: Alerts;
  stop(): Promise<void>;
}

export async function startWebhooks(core: Core, config: EventsConfig, nodeId: string, certificates?: () => CertificateSeen[]): Promise<RunningWebhooks> {
  if (config.alertWebhook) {
    await core.webhooks.keepFlagRow(config.alertWebhook.url, [...ALERT_EVENTS], config.alertWebhook.secret);
  } else {
    // the flag was taken away: its row stops getting anything (kept, with its deliveries, for the record)
    const row = await core.webhooks.flagRow();
    if (row?.enabled) await core.webhooks.update(row.id, { enabled: false }, undefined);
  }
  const worker = new DeliveryWorker(core.store, nodeId, {
    timeoutMs: config.timeoutMs,
    maxResponseBytes: config.maxResponseBytes,
    allowPrivate: config.allowPrivate,
    concurrency: config.concurrency,
    maxPending: config.maxPending,
    backoffMaxMs: config.backoffMaxMs,
  });
  worker.start(core.events);
  const alerts = new Alerts(core, {
    node: nodeId,
    outboxPending: config.alertOutboxPending,
    pending: () => worker.stats.pending,
    certificates,
    post: { timeoutMs: config.timeoutMs, maxResponseBytes: config.maxResponseBytes, allowPrivate: config.allowPrivate },
    direct: config.alertWebhook !== undefined,
  });
  alerts.start();
  const prune = async () => {
    try {
      const n = await core.webhooks.prune(config.historyDays);
      if (n > 0) log.info("webhook deliveries pruned", { deliveries: n, older_than_days: config.historyDays });
    } catch (err) {
      logFailedWrite("webhook deliveries not pruned", {}, err);
    }
  };
  void prune();
  const pruner = setInterval(prune, PRUNE_EVERY_MS);
  pruner.unref();
  return {
    worker,
    alerts,
    async stop() {
      clearInterval(pruner);
      alerts.stop();
      await core.events.stop(); // what the edge queued is written before the worker goes
      await worker.stop();
    },
  };
}
