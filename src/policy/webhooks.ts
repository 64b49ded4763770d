/**
 * How each webhook provider signs a request, as its documentation says
 * (GitLab sends its secret token instead),
 * checked against the secret the policy holds. Each comparison is of
 * digests of equal length in constant time; where the provider signs a
 * timestamp (Stripe, Slack), a request older or newer than the tolerance
 * is refused, so a captured request cannot be replayed later.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";

export interface WebhookRequest {
  /** The URL the provider sent the request to: scheme, Host, the target as sent. */
  url: string;
  header(name: string): string | undefined;
  body: Uint8Array;
  now: number;
}

export interface GenericHmac {
  header: string;
  algorithm: "sha1" | "sha256" | "sha512";
  encoding: "hex" | "base64";
  prefix: string;
}

export interface WebhookCheck {
  secret: string;
  toleranceMs: number;
  hmac?: GenericHmac;
}

export type WebhookVerdict = { verified: true } | { verified: false; code: string; why: string };

const OK: WebhookVerdict = { verified: true };
const fail = (code: string, why: string): WebhookVerdict => ({ verified: false, code, why });

const hmac = (algorithm: string, secret: string, ...parts: (string | Uint8Array)[]) => {
  const h = createHmac(algorithm, secret);
  for (const p of parts) h.update(p);
  return h.digest();
};

/** Whether `given` (text in `encoding`) is the digest `expected`, compared in constant time. */
function sameDigest(expected: Buffer, given: string, encoding: "hex" | "base64"): boolean {
  const valid = encoding === "hex" ? /^[0-9a-fA-F]+$/.test(given) : /^[A-Za-z0-9+/]+={0,2}$/.test(given);
  if (!valid) return false;
  const bytes = Buffer.from(given, encoding);
  return bytes.length === expected.length && timingSafeEqual(bytes, expected);
}

function inTolerance(seconds: string | undefined, check: WebhookCheck, now: number): WebhookVerdict | undefined {
  if (seconds === undefined || !/^\d{1,12}$/.test(seconds)) return fail("TIMESTAMP_MISSING", "the signed timestamp is missing");
  if (Math.abs(now - Number(seconds) * 1000) > check.toleranceMs) return fail("TIMESTAMP_OUT_OF_TOLERANCE", "the signed timestamp is too far from now");
  return undefined;
}

/** GitHub: X-Hub-Signature-256: sha256=hex(HMAC-SHA256(secret, body)). */
function github(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const sig = req.header("x-hub-signature-256");
  if (!sig?.startsWith("sha256=")) return fail("SIGNATURE_MISSING", "no X-Hub-Signature-256");
  return sameDigest(hmac("sha256", check.secret, req.body), sig.slice(7), "hex") ? OK : fail("SIGNATURE_INVALID", "the signature does not match");
}

/** Stripe: Stripe-Signature: t=TIME,v1=hex(HMAC-SHA256(secret, "TIME.body")) (one v1 per secret being rolled). */
function stripe(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const header = req.header("stripe-signature");
  if (!header) return fail("SIGNATURE_MISSING", "no Stripe-Signature");
  let t: string | undefined;
  const v1: string[] = [];
  for (const item of header.split(",")) {
    const eq = item.indexOf("=");
    const [k, value] = [item.slice(0, eq).trim(), item.slice(eq + 1).trim()];
    if (k === "t") t = value;
    else if (k === "v1") v1.push(value);
  }
  const late = inTolerance(t, check, req.now);
  if (late) return late;
  if (v1.length === 0) return fail("SIGNATURE_MISSING", "no v1 signature in Stripe-Signature");
  const expected = hmac("sha256", check.secret, `${t}.`, req.body);
  let ok = false;
  for (const s of v1) ok = sameDigest(expected, s, "hex") || ok;
  return ok ? OK : fail("SIGNATURE_INVALID", "no v1 signature matches");
}

/** Slack: X-Slack-Signature: v0=hex(HMAC-SHA256(secret, "v0:TIME:body")), X-Slack-Request-Timestamp: TIME. */
function slack(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const ts = req.header("x-slack-request-timestamp");
  const late = inTolerance(ts, check, req.now);
  if (late) return late;
  const sig = req.header("x-slack-signature");
  if (!sig?.startsWith("v0=")) return fail("SIGNATURE_MISSING", "no X-Slack-Signature");
  return sameDigest(hmac("sha256", check.secret, `v0:${ts}:`, req.body), sig.slice(3), "hex") ? OK : fail("SIGNATURE_INVALID", "the signature does not match");
}

/** The URL as it came, without its port and with it written out: Twilio's library tries each (a proxy may add or drop the port). */
function twilioUrls(url: string): string[] {
  const u = URL.parse(url);
  if (!u) return [url];
  const rest = `${u.pathname}${u.search}`;
  const port = u.port !== "" ? u.port : u.protocol === "https:" ? "443" : "80";
  return [...new Set([url, `${u.protocol}//${u.hostname}${rest}`, `${u.protocol}//${u.hostname}:${port}${rest}`])];
}

/**
 * Twilio: X-Twilio-Signature: base64(HMAC-SHA1(auth token, URL + each form
 * parameter's name and value, sorted by name)); a JSON body is signed by its
 * SHA-256 in the URL's bodySHA256 parameter instead.
 */
function twilio(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const sig = req.header("x-twilio-signature");
  if (!sig) return fail("SIGNATURE_MISSING", "no X-Twilio-Signature");
  const type = (req.header("content-type") ?? "").toLowerCase();
  let suffix = "";
  const bodySha = URL.parse(req.url)?.searchParams.get("bodySHA256");
  if (bodySha !== null && bodySha !== undefined) {
    const digest = createHash("sha256").update(req.body).digest();
    if (!sameDigest(digest, bodySha, "hex")) return fail("SIGNATURE_INVALID", "the body is not the one bodySHA256 names");
  } else if (type.startsWith("application/x-www-form-urlencoded")) {
    const params = new Map<string, string[]>();
    for (const [k, v] of new URLSearchParams(Buffer.from(req.body).toString("utf8"))) params.set(k, [...(params.get(k) ?? []), v]);
    for (const k of [...params.keys()].sort()) for (const v of params.get(k)!.sort()) suffix += k + v;
  }
  let ok = false;
  for (const url of twilioUrls(req.url)) ok = sameDigest(hmac("sha1", check.secret, url + suffix), sig, "base64") || ok;
  return ok ? OK : fail("SIGNATURE_INVALID", "the signature does not match");
}

/** Shopify: X-Shopify-Hmac-Sha256: base64(HMAC-SHA256(secret, body)). */
function shopify(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const sig = req.header("x-shopify-hmac-sha256");
  if (!sig) return fail("SIGNATURE_MISSING", "no X-Shopify-Hmac-Sha256");
  return sameDigest(hmac("sha256", check.secret, req.body), sig, "base64") ? OK : fail("SIGNATURE_INVALID", "the signature does not match");
}

/**
 * GitLab: X-Gitlab-Token is the secret itself (GitLab signs nothing), so
 * the body is not read; compared as SHA-256 digests, in constant time
 * whatever the length given.
 */
function gitlab(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const token = req.header("x-gitlab-token");
  if (!token) return fail("SIGNATURE_MISSING", "no X-Gitlab-Token");
  const digest = (text: string) => createHash("sha256").update(text).digest();
  return timingSafeEqual(digest(token), digest(check.secret)) ? OK : fail("SIGNATURE_INVALID", "the token does not match");
}

/** Providers whose check reads no body. */
export const BODYLESS_PROVIDERS: ReadonlySet<string> = new Set(["gitlab"]);

/** burrow's own: an HMAC of the body in a header of the policy's choosing, in hex or base64, after an optional prefix. */
function generic(req: WebhookRequest, check: WebhookCheck): WebhookVerdict {
  const h = check.hmac!;
  const sig = req.header(h.header);
  if (!sig || !sig.startsWith(h.prefix)) return fail("SIGNATURE_MISSING", `no ${h.header}`);
  return sameDigest(hmac(h.algorithm, check.secret, req.body), sig.slice(h.prefix.length).trim(), h.encoding) ? OK : fail("SIGNATURE_INVALID", "the signature does not match");
}

export const WEBHOOK_PROVIDERS = { github, gitlab, stripe, slack, twilio, shopify, hmac: generic } as const;
export type WebhookProvider = keyof typeof WEBHOOK_PROVIDERS;
