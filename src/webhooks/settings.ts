/** What the server was told of events: webhooks' limits, the admission hook and the alerts (config/server.ts reads them from the flags). */
export interface EventsConfig {
  allowPrivate: boolean;
  timeoutMs: number;
  maxResponseBytes: number;
  maxPending: number;
  retryWindowMs: number;
  backoffMaxMs: number;
  concurrency: number;
  historyDays: number;
  maxWebhooks: number;
  perUser: number;
  queueMax: number;
  /** --admission-hook with its secret (BURROW_ADMISSION_HOOK_SECRET); undefined: none. */
  admissionHook?: { url: string; secret: string; failOpen: boolean; timeoutMs: number };
  /** --alert-webhook, with BURROW_ALERT_WEBHOOK_SECRET when given. */
  alertWebhook?: { url: string; secret?: string };
  alertOutboxPending: number;
}
