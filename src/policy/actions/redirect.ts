/**
 * redirect: when `from` matches the request's URL (or always, without
 * `from`), the visitor is sent to the URL `to` makes of it, with
 * `status_code` (a 3xx, default 302) and extra headers. When the URL comes
 * out unchanged the request goes on.
 */
import * as v from "valibot";
import { compileHeaderMap, MAX_HEADERS_PER_ACTION, renderHeaderValue, statusCode } from "./common.ts";
import { applyRewrite, compileRewrite } from "./rewrite-url.ts";
import { defineAction, textResponse } from "./types.ts";

/** Characters a Location may hold: visible ASCII (the rest percent-encoded). */
const LOCATION = /^[\x21-\x7e]+$/;

export const redirect = defineAction({
  type: "redirect",
  phases: ["on_http_request"],
  schema: v.strictObject({
    from: v.optional(v.string()),
    to: v.pipe(v.string(), v.minLength(1)),
    status_code: v.optional(statusCode(300, 399), 302),
    headers: v.optional(v.pipe(v.record(v.string(), v.string()), v.maxEntries(MAX_HEADERS_PER_ACTION))),
  }),
  compile(config, tools) {
    const rewrite = compileRewrite(config, tools);
    const headers = compileHeaderMap(config.headers, "headers", tools);
    if (!rewrite) return undefined;
    return {
      type: "redirect",
      run(ctx) {
        const from = ctx.bindings.req().url;
        const out = applyRewrite(rewrite, from, ctx, "redirect");
        ctx.setVariables("redirect", { matches: out?.matches ?? [], url: out?.url ?? "" });
        if (!out || out.url === from) return { kind: "continue", note: out ? "the URL did not change: no redirect" : "no redirect (failed)" };
        if (!LOCATION.test(out.url)) {
          ctx.problem("redirect: the URL it made has spaces or characters a Location cannot hold");
          return { kind: "continue", note: "no redirect (failed)" };
        }
        const extra: [string, string][] = [];
        for (const [name, t] of headers) {
          const value = renderHeaderValue(t, ctx, name);
          if (value !== undefined) extra.push([name, value]);
        }
        const response = textResponse(config.status_code, `Redirecting to ${out.url}\n`, [["location", out.url], ...extra]);
        return { kind: "respond", response, note: `redirected to ${out.url} (${config.status_code})` };
      },
    };
  },
});
