/**
 * add-headers: headers appended to the request (before it goes to the
 * service) or to the response (before it goes to the visitor), values
 * with `${...}`. Added, not replaced: remove-headers first to replace, as
 * ngrok says. Names are lower-cased; the ones the edge owns (Host,
 * framing, X-Forwarded-*, burrow's identity header) are refused at load,
 * as today's --request-header-add is.
 */
import * as v from "valibot";
import { compileHeaderMap, headerMap, renderHeaderValue } from "./common.ts";
import { defineAction } from "./types.ts";

export const addHeaders = defineAction({
  type: "add-headers",
  phases: ["on_http_request", "on_http_response"],
  schema: v.strictObject({ headers: headerMap }),
  compile(config, tools) {
    const headers = compileHeaderMap(config.headers, "headers", tools);
    return {
      type: "add-headers",
      run(ctx) {
        const target = ctx.phase === "on_http_response" ? ctx.bindings.res().headers : ctx.bindings.req().headers;
        const added: Record<string, string> = {};
        for (const [name, t] of headers) {
          const value = renderHeaderValue(t, ctx, name);
          if (value === undefined) continue;
          target.push([name, value]);
          added[name] = value;
        }
        ctx.bindings.changed();
        ctx.setVariables("add_headers", { headers_added: added });
        return { kind: "continue", note: `added ${Object.keys(added).join(", ") || "nothing"}` };
      },
    };
  },
});
