/** remove-headers: every header of these names taken off the request or the response. */
import * as v from "valibot";
import { checkHeaderName, MAX_HEADERS_PER_ACTION } from "./common.ts";
import { defineAction } from "./types.ts";

const NOTHING_REMOVED = { kind: "continue", note: "removed 0 headers" } as const;

export const removeHeaders = defineAction({
  type: "remove-headers",
  phases: ["on_http_request", "on_http_response"],
  schema: v.strictObject({ headers: v.pipe(v.array(v.string()), v.minLength(1), v.maxLength(MAX_HEADERS_PER_ACTION)) }),
  compile(config, tools) {
    config.headers.forEach((name, i) => checkHeaderName(name, ["headers", i], tools));
    const names = new Set(config.headers.map((n) => n.toLowerCase()));
    const lengths = new Set([...names].map((n) => n.length));
    return {
      type: "remove-headers",
      run(ctx) {
        const response = ctx.phase === "on_http_response";
        // read first: a request none of whose fields go keeps its head as it came (no copy, nothing changed)
        if (!(response ? ctx.bindings.res() : ctx.bindings.req()).hasAnyOf(names, lengths)) return NOTHING_REMOVED;
        const list = response ? ctx.bindings.res().headers : ctx.bindings.req().headers;
        let removed = 0;
        for (let i = list.length - 1; i >= 0; i--) {
          if (names.has(list[i]![0].toLowerCase())) {
            list.splice(i, 1);
            removed++;
          }
        }
        ctx.bindings.changed();
        return { kind: "continue", note: `removed ${removed} header${removed === 1 ? "" : "s"}` };
      },
    };
  },
});
