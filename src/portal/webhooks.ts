/**
 * /_burrow/api/me/webhooks: a user's own webhooks, for the events about
 * their own tunnels, tokens and quota (the catalogue's `user` events that
 * concern them). The admin API's handlers (api/webhooks.ts), each held to
 * the session's user: another user's webhook is as unknown as one that
 * does not exist.
 */
import { webhookDocs, webhookHandlers, type WebhookCall } from "../api/webhooks.ts";
import type { PortalRoute, SignedIn } from "./context.ts";

const own =
  (h: (call: WebhookCall) => Promise<Response>) =>
  (req: Request, { core, user, audit, params }: SignedIn) =>
    h({ req, params, core, owner: user.id, audit });

const docs = webhookDocs("The user's own");

export const webhookRoutes: PortalRoute[] = [
  {
    path: "/_burrow/api/me/webhooks",
    methods: { GET: own(webhookHandlers.list), POST: own(webhookHandlers.create) },
    audit: { POST: "webhook.create" },
    docs: { GET: docs.list, POST: docs.create },
  },
  {
    path: "/_burrow/api/me/webhooks/:id",
    methods: { GET: own(webhookHandlers.read), PUT: own(webhookHandlers.update), DELETE: own(webhookHandlers.remove) },
    audit: { PUT: "webhook.update", DELETE: "webhook.delete" },
    docs: { GET: docs.read, PUT: docs.update, DELETE: docs.remove },
  },
  {
    path: "/_burrow/api/me/webhooks/:id/rotate",
    methods: { POST: own(webhookHandlers.rotate) },
    audit: { POST: "webhook.rotate" },
    docs: { POST: docs.rotate },
  },
  {
    path: "/_burrow/api/me/webhooks/:id/deliveries",
    methods: { GET: own(webhookHandlers.deliveries) },
    docs: { GET: docs.deliveries },
  },
  {
    path: "/_burrow/api/me/webhooks/:id/deliveries/:delivery/retry",
    methods: { POST: own(webhookHandlers.retry) },
    audit: { POST: "webhook.retry" },
    docs: { POST: docs.retry },
  },
];
