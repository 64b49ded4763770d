/**
 * url-rewrite: the request's URL rewritten before it goes to the service
 * (the visitor sees nothing of it). Only the path and query may change: a
 * rewrite that lands on another scheme or host is a mistake of the policy
 * (burrow forwards to the tunnel, not to a URL), and the rewritten path
 * is made normal as every path is (http/request-path.ts); one that cannot
 * be, or that failed to evaluate, answers 400 rather than forwarding the
 * request unrewritten.
 */
import * as v from "valibot";
import { normalTarget } from "../../http/request-path.ts";
import { applyRewrite, compileRewrite } from "./rewrite-url.ts";
import { defineAction, textResponse } from "./types.ts";

/** An origin-form target: visible ASCII, starting with '/'. */
const TARGET = /^\/[\x21-\x7e]*$/;

function targetOf(url: string, origin: string): string | undefined {
  if (url.startsWith("/")) return url;
  if (!url.startsWith(origin)) return undefined;
  const rest = url.slice(origin.length);
  if (rest === "") return "/";
  if (rest.startsWith("/")) return rest;
  if (rest.startsWith("?")) return `/${rest}`;
  return undefined; // https://a.example.com.other.net is not on https://a.example.com
}

export const urlRewrite = defineAction({
  type: "url-rewrite",
  phases: ["on_http_request"],
  schema: v.strictObject({ from: v.optional(v.string()), to: v.pipe(v.string(), v.minLength(1)) }),
  compile(config, tools) {
    const rewrite = compileRewrite(config, tools);
    if (!rewrite) return undefined;
    return {
      type: "url-rewrite",
      run(ctx) {
        const req = ctx.bindings.req();
        const before = req.url;
        const out = applyRewrite(rewrite, before, ctx, "url-rewrite");
        ctx.setVariables("url_rewrite", { matches: out?.matches ?? [], url: out?.url ?? "" });
        const refuse = (why: string) => {
          ctx.problem(`url-rewrite: ${why}`);
          return { kind: "respond" as const, response: textResponse(400, "Bad Request: the tunnel's policy could not rewrite this URL.\n"), note: why };
        };
        if (!out) return refuse("it failed to evaluate");
        if (out.url === before) return { kind: "continue", note: "the URL did not change" };
        const target = targetOf(out.url, `${req.scheme}://${req.host}`);
        if (target === undefined) return refuse(`it made ${out.url}, which is not on ${req.scheme}://${req.host}`);
        if (!TARGET.test(target)) return refuse("it made a path with spaces or control characters");
        const normal = normalTarget(target);
        if (typeof normal !== "string") return refuse(normal.why);
        const q = normal.indexOf("?");
        req.path = q < 0 ? normal : normal.slice(0, q);
        req.query = q < 0 ? "" : normal.slice(q + 1);
        ctx.bindings.changed();
        return { kind: "continue", note: `rewritten to ${req.target}` };
      },
    };
  },
});
