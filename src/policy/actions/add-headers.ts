/**
 * add-headers: headers appended to the request (before it goes to the
 * service) or to the response (before it goes to the visitor), values
 * with `${...}`. Added, not replaced: remove-headers first to replace, as
 * ngrok says. Names are lower-cased; the ones the edge owns (Host,
 * framing, X-Forwarded-*, burrow's identity header) are refused at load,
 * as today's --request-header-add is.
 */
import * as v from "valibot";
import { compileHeaderMap, constantHeaders, headerMap, renderHeaderValue } from "./common.ts";
import { defineAction, type ActionResult } from "./types.ts";

export const addHeaders = defineAction({
  type: "add-headers",
  phases: ["on_http_request", "on_http_response"],
  schema: v.strictObject({ headers: headerMap }),
  compile(config, tools) {
    const headers = compileHeaderMap(config.headers, "headers", tools);
    // what the trace says when every header was added, as it mostly is
    const allAdded = `added ${headers.map(([name]) => name).join(", ") || "nothing"}`;
    // the result when every header was added: the same every time, made once
    const ALL_ADDED: ActionResult = { kind: "continue", note: allAdded };
    return {
      type: "add-headers",
      constantFields: constantHeaders(headers),
      run(ctx) {
        const target = ctx.phase === "on_http_response" ? ctx.bindings.res() : ctx.bindings.req();
        // what was added, kept only for a policy that reads the actions' results, or for the trace when some were not
        let added: Record<string, string> | undefined = ctx.keepsVariables ? {} : undefined;
        let all = true;
        for (let i = 0; i < headers.length; i++) {
          const [name, t] = headers[i]!;
          const value = renderHeaderValue(t, ctx, name);
          if (value === undefined) {
            // the first that failed: the ones before it were added, for the trace's words
            if (all && !added) {
              added = {};
              for (let j = 0; j < i; j++) added[headers[j]![0]] = "";
            }
            all = false;
            continue;
          }
          target.append(name, value);
          if (added) added[name] = value;
        }
        ctx.bindings.changed();
        if (ctx.keepsVariables) ctx.setVariables("add_headers", { headers_added: added });
        return all ? ALL_ADDED : { kind: "continue", note: `added ${Object.keys(added!).join(", ") || "nothing"}` };
      },
    };
  },
});
