/**
 * compress-response: the service's response compressed with the coding the
 * visitor prefers among `algorithms` (compression.ts says when not). The
 * action decides and changes the head; the edge streams the body through
 * compression.ts's compressor when the run's outcome names a coding.
 */
import * as v from "valibot";
import { CODINGS, compressedHead, compressionFor, DEFAULT_CODINGS, type Coding } from "../compression.ts";
import { defineAction } from "./types.ts";

export const compressResponse = defineAction({
  type: "compress-response",
  phases: ["on_http_response"],
  schema: v.strictObject({
    algorithms: v.optional(
      v.pipe(
        v.array(v.picklist([...CODINGS, "compress"])),
        v.minLength(1),
        v.check((list) => new Set(list).size === list.length, "each algorithm once"),
      ),
    ),
  }),
  compile(config) {
    const allowed = (config.algorithms ?? DEFAULT_CODINGS).filter((c): c is Coding => c !== "compress");
    return {
      type: "compress-response",
      run(ctx) {
        const req = ctx.bindings.req();
        const res = ctx.bindings.res();
        const verdict = compressionFor({ method: req.method, status: res.status, header: (of, name) => (of === "req" ? req.header(name) : res.header(name)) }, allowed);
        ctx.setVariables("compress", { already_compressed: verdict.coding === undefined && verdict.alreadyCompressed === true, negotiated_algorithm: verdict.coding ?? "" });
        if (!verdict.coding) return { kind: "continue", note: `not compressed: ${verdict.why}` };
        res.headers = compressedHead(res.headers, verdict.coding);
        ctx.compress(verdict.coding);
        ctx.bindings.changed();
        return { kind: "continue", note: `compressed with ${verdict.coding}` };
      },
    };
  },
});
