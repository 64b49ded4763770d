/**
 * /api/webhooks: every webhook, an admin's and the users' own
 * (api/webhooks.ts has the handlers the portal shares). Deliveries are
 * listed per webhook and a finished one sent again.
 */
import { webhookRouteTable, type WebhookCall } from "../api/webhooks.ts";
import type { Handler, Route } from "./context.ts";

/** A shared handler as an admin route's: an admin reaches every webhook. */
const admin =
  (h: (call: WebhookCall) => Promise<Response>): Handler =>
  (req, { core, audit }) =>
    h({ req, params: req.params as Record<string, string>, core, owner: undefined, audit });

export const webhookRoutes: Route[] = webhookRouteTable("/api/webhooks", "Every", admin);
