/**
 * log: fields (values with `${...}`) put on the request's record: the
 * inspector shows them and the server writes them in its structured log.
 * A number or a bool the policy wrote stays one there (ngrok's metadata
 * is a map of any); a string is text, interpolated. A value that fails to
 * evaluate is logged empty, and the failure is told.
 */
import * as v from "valibot";
import type { Template } from "../cel/template.ts";
import type { LogValue } from "../outcome.ts";
import { render } from "./common.ts";
import { defineAction } from "./types.ts";

/** Fields of one log action. */
const MAX_FIELDS = 32;

export const log = defineAction({
  type: "log",
  phases: ["on_tcp_connect", "on_http_request", "on_http_response"],
  schema: v.strictObject({ metadata: v.pipe(v.record(v.string(), v.union([v.string(), v.pipe(v.number(), v.finite()), v.boolean()])), v.maxEntries(MAX_FIELDS)) }),
  compile(config, tools) {
    const fields: (readonly [string, Template | number | boolean | undefined])[] = Object.entries(config.metadata).map(([name, value]) => [name, typeof value === "string" ? tools.template(value, ["metadata", name]) : value] as const);
    return {
      type: "log",
      run(ctx) {
        const out: Record<string, LogValue> = {};
        for (const [name, t] of fields) {
          if (typeof t === "number" || typeof t === "boolean") out[name] = t;
          else if (t) out[name] = render(t, ctx, `metadata.${name}`) ?? "";
        }
        ctx.log(out);
        ctx.setVariables("log", { metadata: out });
        return { kind: "continue", note: "logged" };
      },
    };
  },
});
