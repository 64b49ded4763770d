/**
 * Standard Webhooks signatures (https://www.standardwebhooks.com): a
 * message is signed as `<webhook-id>.<webhook-timestamp>.<body>` with
 * HMAC-SHA256 under the secret's key (the base64 after `whsec_`), and the
 * signature sent as `v1,<base64>`. Several signatures are separated by
 * spaces, which is how a rotation's overlap signs with the old secret and
 * the new: a receiver that knows either accepts. Receivers verify with the
 * `standardwebhooks` or `svix` libraries unchanged.
 */
import { createHmac, randomBytes } from "node:crypto";

export const SECRET_PREFIX = "whsec_";
/** Bytes of a secret's key: 256 bits. */
const KEY_BYTES = 32;

/** A new secret: "whsec_" and the base64 of 32 random bytes. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(KEY_BYTES).toString("base64");
}

/** Whether a string is a secret of that form with a key of 24 to 64 bytes (as the specification asks). */
export function isWebhookSecret(s: string): boolean {
  if (!s.startsWith(SECRET_PREFIX)) return false;
  const b64 = s.slice(SECRET_PREFIX.length);
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(b64)) return false;
  const n = Buffer.from(b64, "base64").length;
  return n >= 24 && n <= 64;
}

/** `v1,<base64 HMAC-SHA256>` of one message under one secret. */
export function signature(secret: string, id: string, timestampS: number, body: string): string {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), "base64");
  return "v1," + createHmac("sha256", key).update(`${id}.${timestampS}.${body}`).digest("base64");
}

/** The three headers of a signed message; `secrets`: the current one first, then any still in their overlap. */
export function signedHeaders(secrets: readonly string[], id: string, timestampS: number, body: string): Record<string, string> {
  return {
    "webhook-id": id,
    "webhook-timestamp": String(timestampS),
    "webhook-signature": secrets.map((s) => signature(s, id, timestampS, body)).join(" "),
  };
}
