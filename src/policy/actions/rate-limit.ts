/**
 * rate-limit: at most `capacity` requests per `rate` (a duration, "60s")
 * in each bucket, a bucket being the values of the `bucket_key`
 * expressions (`conn.client_ip`, `req.headers['x-api-key']`...) together;
 * past it, 429 with Retry-After (in on_tcp_connect, the connection is
 * closed). Counted in a sliding window by the store the edge gives
 * (rate-limit-store.ts): in memory per process today, so each node of a
 * cluster counts on its own, as ngrok's ingress servers do. `enforce:
 * false` only records `actions.ngrok.rate_limit.limited`.
 */
import { createHash } from "node:crypto";
import * as v from "valibot";
import { isCelError } from "@bufbuild/cel";
import { valueText } from "../cel/template.ts";
import { flag, parseDuration } from "./common.ts";
import type { RateLimitVerdict } from "../rate-limit-store.ts";
import { defineAction, textResponse, type ActionContext, type ActionResult } from "./types.ts";

/** ngrok's bounds; durations from 1 s (ngrok: 60 s, multiples of 10 s) to 24 h. */
const MAX_CAPACITY = 2_000_000_000;
const MIN_RATE_MS = 1000;
const MAX_RATE_MS = 24 * 3_600_000;
const MAX_BUCKET_KEYS = 10;
/** The code a limit's refusal carries in its verdict (outcome.ts): the edge tells of it (the policy.rate_limited event). */
export const RATE_LIMITED = "RATE_LIMITED";

export const rateLimit = defineAction({
  type: "rate-limit",
  phases: ["on_tcp_connect", "on_http_request"],
  schema: v.strictObject({
    name: v.pipe(v.string(), v.minLength(1), v.maxLength(1023)),
    enforce: flag,
    algorithm: v.picklist(["sliding_window"]),
    capacity: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_CAPACITY)),
    rate: v.string(),
    bucket_key: v.optional(v.pipe(v.array(v.string()), v.maxLength(MAX_BUCKET_KEYS)), []),
  }),
  compile(config, tools) {
    const windowMs = parseDuration(config.rate);
    if (windowMs === undefined || windowMs < MIN_RATE_MS || windowMs > MAX_RATE_MS) tools.error(["rate"], `'${config.rate}' is not a duration from 1s to 24h (such as 60s, 10m, 1h)`);
    const keys = config.bucket_key.map((text, i) => tools.expression(text, ["bucket_key", i], "value"));
    if (windowMs === undefined || keys.some((k) => k === undefined)) return undefined;
    const prefix = `${tools.key}\0${config.name}\0`;
    // the store's key of each bucket seen lately: made (and hashed) once, not once a request
    const storeKeys = new Map<string, string>();
    let lastBucket: string | undefined;
    let lastKey = "";
    const keyOf = (bucket: string): string => {
      // one visitor's requests in a row: the same bucket
      if (bucket === lastBucket) return lastKey;
      let key = storeKeys.get(bucket);
      if (key === undefined) {
        key = storeKey(prefix, bucket);
        if (storeKeys.size >= KEYS_KEPT) storeKeys.clear();
        storeKeys.set(bucket, key);
      }
      lastBucket = bucket;
      lastKey = key;
      return key;
    };
    const limited = (bucket: string, verdict: RateLimitVerdict, ctx: ActionContext): ActionResult => {
      if (ctx.keepsVariables) ctx.setVariables("rate_limit", { bucket_key: bucket, limited: verdict.limited });
      // what is left in the window is told only to a trace that keeps it (a string made a request, otherwise)
      if (!verdict.limited && !ctx.traced) return COUNTED;
      if (!verdict.limited || !config.enforce) return { kind: "continue", note: verdict.limited ? "over the limit (not enforced)" : `${verdict.remaining} left in the window` };
      if (ctx.phase === "on_tcp_connect") return { kind: "close", note: "over the limit" };
      const retry = String(Math.max(1, Math.ceil(verdict.retryAfterMs / 1000)));
      return { kind: "respond", response: textResponse(429, "Too Many Requests\n", [["retry-after", retry]]), note: `over the limit: retry after ${retry} s`, code: RATE_LIMITED };
    };
    return {
      type: "rate-limit",
      run(ctx) {
        let bucket = "";
        for (let i = 0; i < keys.length; i++) {
          const k = keys[i]!;
          const value = k.evaluate(ctx.bindings);
          // a key that does not evaluate (a header that is not there) is an empty value: one bucket for all such requests
          if (isCelError(value)) ctx.problem(`rate-limit bucket_key ${k.text}: ${value.message}`);
          const text = isCelError(value) ? "" : valueText(value);
          bucket = i === 0 ? text : `${bucket}\0${text}`;
        }
        // a visit judged again was counted when it came: a limit bounds what comes, not what is open
        if (ctx.bindings.input.rejudging) return limited(bucket, NOT_COUNTED, ctx);
        // the run's clock (read once for every layer and phase of it), not a read of its own
        const verdict = ctx.services.rateLimits.hit(keyOf(bucket), config.capacity, windowMs, ctx.bindings.now);
        // the store in this process answers at once; one shared between nodes may wait
        return verdict instanceof Promise ? verdict.then((v) => limited(bucket, v, ctx)) : limited(bucket, verdict, ctx);
      },
    };
  },
});

/** A request counted and let through, in a run whose trace keeps no note. */
const COUNTED: ActionResult = { kind: "continue" };
/** A visit judged again: under the limit, nothing counted. */
const NOT_COUNTED: RateLimitVerdict = { limited: false, remaining: 0, retryAfterMs: 0 };

/** Store keys an action keeps made, by bucket (the visitors of the moment); past it, it starts again. */
const KEYS_KEPT = 64;

/** Bucket keys up to this long are kept as they are; a longer one (a header's value, say) by its digest. */
const PLAIN_KEY = 64;

/** The store's key of a bucket: the action's prefix and the bucket as it is when short (marked so no digest can be one), else its digest. */
function storeKey(prefix: string, bucket: string): string {
  if (bucket.length <= PLAIN_KEY) return `${prefix}=${bucket}`;
  return `${prefix}#${createHash("sha256").update(bucket).digest("base64url")}`;
}
