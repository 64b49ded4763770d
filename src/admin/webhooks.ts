/**
 * /api/webhooks: every webhook, an admin's and the users' own
 * (api/webhooks.ts has the handlers the portal shares). Deliveries are
 * listed per webhook and a finished one sent again.
 */
import { webhookDocs, webhookHandlers, type WebhookCall } from "../api/webhooks.ts";
import type { Handler, Route } from "./context.ts";

/** A shared handler as an admin route's: an admin reaches every webhook. */
const admin =
  (h: (call: WebhookCall) => Promise<Response>): Handler =>
  (req, { core, audit }) =>
    h({ req, params: req.params as Record<string, string>, core, owner: undefined, audit });

const docs = webhookDocs("Every");

export const webhookRoutes: Route[] = [
  {
    path: "/api/webhooks",
    methods: { GET: admin(webhookHandlers.list), POST: admin(webhookHandlers.create) },
    audit: { POST: "webhook.create" },
    docs: { GET: docs.list, POST: docs.create },
  },
  {
    path: "/api/webhooks/:id",
    methods: { GET: admin(webhookHandlers.read), PUT: admin(webhookHandlers.update), DELETE: admin(webhookHandlers.remove) },
    audit: { PUT: "webhook.update", DELETE: "webhook.delete" },
    docs: { GET: docs.read, PUT: docs.update, DELETE: docs.remove },
  },
  {
    path: "/api/webhooks/:id/rotate",
    methods: { POST: admin(webhookHandlers.rotate) },
    audit: { POST: "webhook.rotate" },
    docs: { POST: docs.rotate },
  },
  {
    path: "/api/webhooks/:id/deliveries",
    methods: { GET: admin(webhookHandlers.deliveries) },
    docs: { GET: docs.deliveries },
  },
  {
    path: "/api/webhooks/:id/deliveries/:delivery/retry",
    methods: { POST: admin(webhookHandlers.retry) },
    audit: { POST: "webhook.retry" },
    docs: { POST: docs.retry },
  },
];
