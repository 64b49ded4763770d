/**
 * log: fields (values with `${...}`) put on the request's record: the
 * inspector shows them and the server writes them in its structured log.
 * A value that fails to evaluate is logged empty, and the failure is told.
 */
import * as v from "valibot";
import { render } from "./common.ts";
import { defineAction } from "./types.ts";

/** Fields of one log action. */
const MAX_FIELDS = 32;

export const log = defineAction({
  type: "log",
  phases: ["on_tcp_connect", "on_http_request", "on_http_response"],
  schema: v.strictObject({ metadata: v.pipe(v.record(v.string(), v.union([v.string(), v.number(), v.boolean()])), v.maxEntries(MAX_FIELDS)) }),
  compile(config, tools) {
    const fields = Object.entries(config.metadata).map(([name, value]) => [name, tools.template(String(value), ["metadata", name])] as const);
    return {
      type: "log",
      run(ctx) {
        const out: Record<string, string> = {};
        for (const [name, t] of fields) if (t) out[name] = render(t, ctx, `metadata.${name}`) ?? "";
        ctx.log(out);
        ctx.setVariables("log", { metadata: out });
        return { kind: "continue", note: "logged" };
      },
    };
  },
});
