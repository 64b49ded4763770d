/**
 * Webhooks: every webhook on the server, the admins' own, the users' (made
 * on the portal) and the --alert-webhook's, on the shared webhooks view
 * (ui/components/webhooks.tsx) with the admin API's calls.
 */
import { api, type Webhook } from "../api.ts";
import { useTitle } from "../../../../ui/hooks.ts";
import { WebhooksView } from "../../../../ui/components/webhooks.tsx";
import type { WebhooksClient } from "../../../../ui/components/webhook-types.ts";

const client: WebhooksClient = {
  list: api.webhooks,
  create: api.createWebhook,
  update: api.updateWebhook,
  remove: api.deleteWebhook,
  rotate: api.rotateWebhook,
  deliveries: api.deliveries,
  retry: api.retryDelivery,
};

const owner = (w: Webhook) => (w.user_id === null ? (w.origin === "flag" ? "--alert-webhook" : "admin's") : `user #${w.user_id}'s`);

export function WebhooksPage() {
  useTitle("Webhooks");
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Webhooks</h1>
        <p class="muted">
          Events (a tunnel online, a token revoked, a quota used up…) are posted to each webhook's URL, signed with its secret as Standard Webhooks says, in
          order, and tried again for a day when its receiver does not answer. Users make their own on the portal, for their own tunnels, tokens and quota.
        </p>
      </div>
      <WebhooksView client={client} owner={owner} eventsHint="* or, comma-separated, tunnel.*, token.revoked…" empty="No webhook yet." />
    </>
  );
}
