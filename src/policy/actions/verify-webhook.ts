/**
 * verify-webhook: the request must carry the signature its provider makes
 * with `secret` over its body (webhooks.ts: GitHub, Stripe, Slack, Twilio,
 * Shopify, and burrow's generic `hmac` with its header, algorithm,
 * encoding and prefix), or GitLab's token, which is the secret and needs
 * no body; else 403, as ngrok answers. Where the provider
 * signs a timestamp, `timestamp_tolerance` (default 5m) bounds its age.
 * The action reads the body: the edge hands it over, up to its limit
 * (--policy-body-limit, 1 MiB by default); a larger one is answered 413
 * (enforced) rather than read.
 */
import * as v from "valibot";
import { BODYLESS_PROVIDERS, WEBHOOK_PROVIDERS, type WebhookProvider } from "../webhooks.ts";
import { flag, parseDuration, render } from "./common.ts";
import { defineAction, textResponse } from "./types.ts";

const DEFAULT_TOLERANCE = "5m";

export const verifyWebhook = defineAction({
  type: "verify-webhook",
  phases: ["on_http_request"],
  schema: v.strictObject({
    provider: v.string(),
    secret: v.pipe(v.string(), v.minLength(1)),
    enforce: flag,
    timestamp_tolerance: v.optional(v.string(), DEFAULT_TOLERANCE),
    header: v.optional(v.pipe(v.string(), v.regex(/^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/, "not a header name"))),
    algorithm: v.optional(v.picklist(["sha1", "sha256", "sha512"]), "sha256"),
    encoding: v.optional(v.picklist(["hex", "base64"]), "hex"),
    prefix: v.optional(v.string(), ""),
  }),
  compile(config, tools) {
    const provider = config.provider as WebhookProvider;
    if (!(config.provider in WEBHOOK_PROVIDERS)) {
      tools.error(["provider"], `'${config.provider}' is not a provider burrow verifies (${Object.keys(WEBHOOK_PROVIDERS).join(", ")})`);
    }
    if (provider === "hmac" && config.header === undefined) tools.error([], "the hmac provider needs `header`: where the signature is");
    if (provider !== "hmac" && config.header !== undefined) tools.error(["header"], "`header`, `algorithm`, `encoding` and `prefix` are for the hmac provider");
    const toleranceMs = parseDuration(config.timestamp_tolerance);
    if (toleranceMs === undefined) tools.error(["timestamp_tolerance"], `'${config.timestamp_tolerance}' is not a duration (such as 5m)`);
    const secret = tools.template(config.secret, ["secret"]);
    if (!secret || toleranceMs === undefined || !(config.provider in WEBHOOK_PROVIDERS)) return undefined;
    const hmac = provider === "hmac" ? { header: config.header!, algorithm: config.algorithm, encoding: config.encoding, prefix: config.prefix } : undefined;
    const bodyless = BODYLESS_PROVIDERS.has(provider);
    return {
      type: "verify-webhook",
      readsBody: !bodyless,
      run(ctx) {
        const req = ctx.bindings.req();
        const key = render(secret, ctx, "secret");
        let verdict;
        if (key === undefined || key === "") verdict = { verified: false as const, code: "SECRET_MISSING", why: "the secret did not evaluate" };
        else if (bodyless) verdict = WEBHOOK_PROVIDERS[provider]({ url: "", header: (n) => req.header(n), body: new Uint8Array(0), now: ctx.services.now() }, { secret: key, toleranceMs, hmac });
        else if (req.bodyLimit !== undefined) verdict = { verified: false as const, code: "BODY_TOO_LARGE", why: `the body is larger than the ${req.bodyLimit} bytes the edge reads for it` };
        else if (!req.body) verdict = { verified: false as const, code: "BODY_MISSING", why: "the edge gave the action no body" };
        else {
          const url = `${req.scheme}://${req.host}${req.rawTarget}`;
          verdict = WEBHOOK_PROVIDERS[provider]({ url, header: (n) => req.header(n), body: req.body, now: ctx.services.now() }, { secret: key, toleranceMs, hmac });
        }
        ctx.setVariables("verify_webhook", verdict.verified ? { verified: true } : { verified: false, error: { code: verdict.code, message: verdict.why } });
        if (verdict.verified) return { kind: "continue", note: `${provider} signature verified` };
        if (!config.enforce) return { kind: "continue", note: `not verified: ${verdict.why} (not enforced)` };
        if (verdict.code === "BODY_TOO_LARGE") {
          return { kind: "respond", response: textResponse(413, `Payload Too Large: a webhook's body is read up to ${req.bodyLimit} bytes to check its signature.\n`), note: `not verified: ${verdict.why}` };
        }
        return { kind: "respond", response: textResponse(403, "Forbidden: the webhook's signature does not verify.\n"), note: `not verified: ${verdict.why}` };
      },
    };
  },
});
