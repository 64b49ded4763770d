/**
 * Webhook signatures as the providers make them, for the tests that send
 * signed requests through a real edge. Where the provider publishes an npm
 * library that signs (GitHub's @octokit/webhooks-methods, Stripe's
 * `stripe.webhooks.generateTestHeaderString`), it is used when it is
 * installed; otherwise the signature is made with node:crypto as the
 * provider's documentation says (GitHub: "sha256=" and the hex HMAC-SHA256
 * of the body; Stripe: "t=TIME,v1=" and the hex HMAC-SHA256 of "TIME.body";
 * Slack: "v0=" and the hex HMAC-SHA256 of "v0:TIME:body" with
 * X-Slack-Request-Timestamp), which `source` says.
 */
import { createHmac } from "node:crypto";

type Signer = (secret: string, payload: string) => Promise<string>;
type StripeHeader = (o: { payload: string; secret: string; timestamp: number }) => string;

/** A module if it is installed, else undefined (a name not found must not fail the test). */
async function optional<T>(name: string): Promise<T | undefined> {
  try {
    return (await import(name)) as T;
  } catch {
    return undefined;
  }
}

const octokit = await optional<{ sign: Signer }>("@octokit/webhooks-methods");
const stripeModule = await optional<{ default: { webhooks: { generateTestHeaderString: StripeHeader } } | (new (key: string) => { webhooks: { generateTestHeaderString: StripeHeader } }) }>("stripe");

/** Where each signature comes from: the provider's library, or its documented scheme. */
export const source = { github: octokit ? "@octokit/webhooks-methods" : "GitHub's documented scheme", stripe: stripeModule ? "stripe" : "Stripe's documented scheme" };

const hmacHex = (secret: string, ...parts: (string | Uint8Array)[]) => {
  const h = createHmac("sha256", secret);
  for (const p of parts) h.update(p);
  return h.digest("hex");
};

/** X-Hub-Signature-256 for `body`. */
export async function githubSignature(secret: string, body: string): Promise<string> {
  if (octokit) return octokit.sign(secret, body);
  return `sha256=${hmacHex(secret, body)}`;
}

/** Stripe-Signature for `body` at `timestamp` (seconds). */
export function stripeSignature(secret: string, body: string, timestamp: number): string {
  if (stripeModule) {
    const S = stripeModule.default;
    const webhooks = typeof S === "function" ? new S("sk_test_unused").webhooks : S.webhooks;
    return webhooks.generateTestHeaderString({ payload: body, secret, timestamp });
  }
  return `t=${timestamp},v1=${hmacHex(secret, `${timestamp}.`, body)}`;
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
