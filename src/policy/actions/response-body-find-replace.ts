/**
 * response-body-find-replace: the service's response body rewritten on
 * its way to the visitor, as ngrok's (body-replace.ts for the rules). The
 * run makes the rules (their `${...}` evaluated now, with the response's
 * head) and hands them to the edge, which buffers the body up to
 * --policy-response-body-limit, replaces, and sends it with a
 * Content-Length (edge/traffic-policy/response-rewrite.ts); compressed
 * after, when compress-response chose a coding. Not rewritten: a HEAD's
 * response, a 204 or 304 (no body), a 206 (a range of the body), and a body the service encoded
 * (Content-Encoding other than identity), which is told as a problem and
 * passes as it came.
 */
import { compileReplacements, prepareReplacements, replacementsSchema, responseWithoutBody, serviceCoding } from "./body-replace.ts";
import { defineAction } from "./types.ts";

export const responseBodyFindReplace = defineAction({
  type: "response-body-find-replace",
  phases: ["on_http_response"],
  schema: replacementsSchema,
  compile(config, tools) {
    const rules = compileReplacements(config, tools);
    if (!rules) return undefined;
    return {
      type: "response-body-find-replace",
      run(ctx) {
        if (responseWithoutBody(ctx)) return { kind: "continue", note: "no body" };
        const res = ctx.bindings.res();
        // a part of the body (Content-Range) cannot be rewritten as the whole is
        if (res.status === 206) {
          ctx.problem("response-body-find-replace: a range (206) goes on unchanged");
          return { kind: "continue", note: "a range: unchanged" };
        }
        // the service's own coding: one compress-response chose is applied after the rewrite
        const coding = serviceCoding(ctx);
        if (coding) {
          ctx.problem(`response-body-find-replace: the body is encoded (${coding}), so it goes on unchanged`);
          return { kind: "continue", note: `encoded (${coding}): unchanged` };
        }
        const prepared = prepareReplacements(rules, ctx);
        if (res.bodyRewrites) res.bodyRewrites.push(...prepared);
        else res.bodyRewrites = prepared;
        return { kind: "continue", note: `${prepared.length} replacement${prepared.length === 1 ? "" : "s"} for the body` };
      },
    };
  },
});
