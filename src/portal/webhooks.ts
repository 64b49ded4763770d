/**
 * /_burrow/api/me/webhooks: a user's own webhooks, for the events about
 * their own tunnels, tokens and quota (the catalogue's `user` events that
 * concern them). The admin API's handlers (api/webhooks.ts), each held to
 * the session's user: another user's webhook is as unknown as one that
 * does not exist.
 */
import { webhookRouteTable, type WebhookCall } from "../api/webhooks.ts";
import type { PortalRoute, SignedIn } from "./context.ts";

const own =
  (h: (call: WebhookCall) => Promise<Response>) =>
  (req: Request, { core, user, audit, params }: SignedIn) =>
    h({ req, params, core, owner: user.id, audit });

export const webhookRoutes: PortalRoute[] = webhookRouteTable("/_burrow/api/me/webhooks", "The user's own", own);
