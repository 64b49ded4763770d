/**
 * Webhooks as the admin API (/api/webhooks) and the portal
 * (/_burrow/api/me/webhooks) answer them, and what a page needs of either
 * side: the same calls on another base path.
 */

/** A webhook as listed: never its secret. */
export interface Webhook {
  id: number;
  url: string;
  description: string;
  events: string[];
  enabled: boolean;
  user_id: number | null;
  origin: "api" | "portal" | "flag";
  pending: number;
  dropped: number;
  previous_secret_until: string | null;
  created_at: string;
  updated_at: string;
}

/** A webhook with its secret: the answer of its creation or of a rotation. */
export interface WebhookWithSecret extends Webhook {
  secret: string;
  message: string;
}

export interface Delivery {
  id: number;
  event_id: string;
  event_type: string;
  event_at: string;
  status: "pending" | "delivered" | "failed" | "dropped";
  attempts: number;
  created_at: string;
  last_attempt_at: string | null;
  response_status: number | null;
  duration_ms: number | null;
  error: string | null;
  next_attempt_at: string | null;
  give_up_at: string;
  delivered_at: string | null;
}

export type WebhookFields = Pick<Webhook, "url" | "events" | "description" | "enabled">;

/** The webhook calls of one side (the admin API's, or the portal's for the user's own). */
export interface WebhooksClient {
  list(): Promise<Webhook[]>;
  create(body: { url: string; events: string[]; description?: string }): Promise<WebhookWithSecret>;
  update(webhookId: number, body: Partial<WebhookFields>): Promise<Webhook>;
  remove(webhookId: number): Promise<{ status: string }>;
  rotate(webhookId: number, overlapSeconds: number): Promise<WebhookWithSecret>;
  deliveries(webhookId: number, limit: number): Promise<Delivery[]>;
  retry(webhookId: number, deliveryId: number): Promise<Delivery>;
}
