/**
 * request-body-find-replace: the request's body rewritten before it goes
 * to the service, as ngrok's: every match of each rule's `from` (RE2)
 * replaced by its `to` (`$1` groups; empty deletes), rules in order
 * (body-replace.ts). The action reads the body: the edge hands it over,
 * up to --policy-body-limit, and sends the rewritten one in its place with
 * a Content-Length of its new size (a chunked body then goes with a
 * length). A body larger than the limit is answered 413, as verify-webhook
 * answers it: it cannot be rewritten, and passing it on as it came would
 * pass what the policy means to take out. A body that is not UTF-8 goes on
 * unchanged (told as a problem); a rule that fails (an interpolation, a
 * pattern made at run time, one past its steps) fails the action: 500.
 */
import { bodyText, compileReplacements, prepareReplacements, replaceAll, replacementsSchema } from "./body-replace.ts";
import { defineAction, textResponse } from "./types.ts";

export const requestBodyFindReplace = defineAction({
  type: "request-body-find-replace",
  phases: ["on_http_request"],
  schema: replacementsSchema,
  compile(config, tools) {
    const rules = compileReplacements(config, tools);
    if (!rules) return undefined;
    return {
      type: "request-body-find-replace",
      readsBody: true,
      run(ctx) {
        const req = ctx.bindings.req();
        if (req.bodyLimit !== undefined) {
          return { kind: "respond", response: textResponse(413, `Payload Too Large: a body is read up to ${req.bodyLimit} bytes to be rewritten.\n`), note: `the body is larger than the ${req.bodyLimit} bytes the edge reads` };
        }
        const body = req.body;
        // an empty body stays empty: a request sent without one is not given one
        if (!body || body.byteLength === 0) return { kind: "continue", note: "no body" };
        const text = bodyText(body);
        if (text === undefined) {
          ctx.problem("request-body-find-replace: the body is not UTF-8 text, so it goes on unchanged");
          return { kind: "continue", note: "not UTF-8: unchanged" };
        }
        const out = replaceAll(text, prepareReplacements(rules, ctx));
        if (out === text) return { kind: "continue", note: "nothing matched" };
        const bytes = Buffer.from(out, "utf8");
        req.body = bytes;
        req.bodyReplaced = true;
        // the framing as the new body has it: a length, whatever it came with (the edge frames the bytes by it)
        const headers = req.headers;
        req.headers = headers.filter(([n]) => !/^(content-length|transfer-encoding)$/i.test(n));
        req.headers.push(["Content-Length", String(bytes.byteLength)]);
        ctx.bindings.changed();
        return { kind: "continue", note: `rewritten: ${body.byteLength} bytes became ${bytes.byteLength}` };
      },
    };
  },
});
