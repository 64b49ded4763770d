/**
 * The user's own webhooks: the events about their tunnels, tokens and
 * quota posted to a URL of theirs, signed (Standard Webhooks), on the
 * shared webhooks view (ui/components/webhooks.tsx) with the portal's
 * calls (/_burrow/api/me/webhooks).
 */
import { useTitle } from "../../../ui/hooks.ts";
import { WebhooksView } from "../../../ui/components/webhooks.tsx";
import { myWebhooks } from "../api.ts";

export function WebhooksPage() {
  useTitle("Webhooks");
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Webhooks</h1>
        <p class="muted">
          What happens to your tunnels, devices and quota (a tunnel online or offline, a handshake refused, a token made or revoked, 80 % of your quota…) is
          posted to each webhook's URL as it happens, signed with its secret as Standard Webhooks says (the <code>standardwebhooks</code> and{" "}
          <code>svix</code> libraries verify it), in order, and tried again for a day when your receiver does not answer.
        </p>
      </div>
      <WebhooksView
        client={myWebhooks}
        eventsHint="* for every event about you, or comma-separated: tunnel.*, token.*, quota.*, policy.rate_limited, webhook.dropped…"
        empty="No webhook yet: make one above to hear of your tunnels without polling."
      />
    </>
  );
}
