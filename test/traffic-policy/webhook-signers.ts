/**
 * Webhook signatures as the providers make them, for the tests that send
 * signed requests through a real edge: GitHub's with its own library
 * (@octokit/webhooks-methods), Stripe's with its SDK's test header helper
 * (`stripe.webhooks.generateTestHeaderStringAsync`). Slack publishes no
 * signing library, so its fields are made as its documentation says: "v0="
 * and the hex HMAC-SHA256 of "v0:TIME:body", with X-Slack-Request-Timestamp.
 */
import { createHmac } from "node:crypto";
import { sign } from "@octokit/webhooks-methods";
import Stripe from "stripe";

const stripeWebhooks = new Stripe("sk_test_unused").webhooks;

const hmacHex = (secret: string, ...parts: (string | Uint8Array)[]) => {
  const h = createHmac("sha256", secret);
  for (const p of parts) h.update(p);
  return h.digest("hex");
};

/** X-Hub-Signature-256 for `body`. */
export function githubSignature(secret: string, body: string): Promise<string> {
  return sign(secret, body);
}

/** Stripe-Signature for `body` at `timestamp` (seconds). */
export function stripeSignature(secret: string, body: string, timestamp: number): Promise<string> {
  return stripeWebhooks.generateTestHeaderStringAsync({ payload: body, secret, timestamp });
}

/** Slack's two fields for `body` at `timestamp` (seconds). */
export function slackFields(secret: string, body: string, timestamp: number): [string, string][] {
  return [
    ["X-Slack-Request-Timestamp", String(timestamp)],
    ["X-Slack-Signature", `v0=${hmacHex(secret, `v0:${timestamp}:`, body)}`],
  ];
}

/** One byte of `body` changed (its 6th). */
export function oneByteChanged(body: string): string {
  return body.slice(0, 5) + String.fromCharCode(body.charCodeAt(5) ^ 1) + body.slice(6);
}
