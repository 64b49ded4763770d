/**
 * sse-find-replace: each event of a Server-Sent Events response rewritten
 * on its way to the visitor, as ngrok's, in on_event_stream_message.
 * `replacements` are body-find-replace's (body-replace.ts: RE2 `from`,
 * `to` with `$1`, both with `${...}`) and a `field` each: `data` (the
 * default) or `retry`, itself with `${...}`.
 *
 * The phase's rules are judged once, on the response's head, with
 * on_http_response's variables (ngrok gives the phase no variables of an
 * event's own); the rules of the matching ones are made then, and the edge
 * applies them to each event as it streams (edge/traffic-policy/
 * event-stream.ts), never holding more than one event. Not rewritten: a
 * response that is not `text/event-stream`, a HEAD's, one without a body,
 * and one the service encoded (Content-Encoding other than identity),
 * which is told as a problem and passes as it came.
 */
import * as v from "valibot";
import { STREAM_FIELDS, type StreamField, type StreamReplacement } from "../message.ts";
import type { Template } from "../cel/template.ts";
import { compileReplacements, MAX_REPLACEMENTS, prepareReplacements, ReplaceFailed, responseWithoutBody, serviceCoding } from "./body-replace.ts";
import { defineAction } from "./types.ts";

const schema = v.strictObject({
  replacements: v.pipe(
    v.array(
      v.strictObject({
        field: v.optional(v.string(), "data"),
        from: v.pipe(v.string(), v.minLength(1, "`from` is the pattern to find: it cannot be empty")),
        to: v.optional(v.string(), ""),
      }),
    ),
    v.minLength(1, "at least one replacement"),
    v.maxLength(MAX_REPLACEMENTS, `at most ${MAX_REPLACEMENTS} replacements`),
  ),
});

const isField = (s: string): s is StreamField => (STREAM_FIELDS as readonly string[]).includes(s);
const FIELD_ERROR = `must be ${STREAM_FIELDS.join(" or ")}`;

/** Whether a response's Content-Type names an event stream. */
export function isEventStream(contentType: string | undefined): boolean {
  return contentType !== undefined && contentType.split(";", 1)[0]!.trim().toLowerCase() === "text/event-stream";
}

export const sseFindReplace = defineAction({
  type: "sse-find-replace",
  phases: ["on_event_stream_message"],
  schema,
  compile(config, tools) {
    const rules = compileReplacements(config, tools);
    let ok = rules !== undefined;
    const fields: Template[] = [];
    config.replacements.forEach((r, i) => {
      const field = tools.template(r.field, ["replacements", i, "field"]);
      if (!field) return void (ok = false);
      if (field.constant !== undefined && !isField(field.constant)) {
        tools.error(["replacements", i, "field"], FIELD_ERROR);
        ok = false;
      }
      fields.push(field);
    });
    if (!ok || !rules) return undefined;
    return {
      type: "sse-find-replace",
      run(ctx) {
        if (responseWithoutBody(ctx)) return { kind: "continue", note: "no body" };
        const res = ctx.bindings.res();
        if (!isEventStream(res.sentHeader("content-type"))) return { kind: "continue", note: "not an event stream: unchanged" };
        const coding = serviceCoding(ctx);
        if (coding) {
          ctx.problem(`sse-find-replace: the stream is encoded (${coding}), so it goes on unchanged`);
          return { kind: "continue", note: `encoded (${coding}): unchanged` };
        }
        const prepared = prepareReplacements(rules, ctx);
        const out: StreamReplacement[] = [];
        for (let i = 0; i < prepared.length; i++) {
          const field = fields[i]!.render(ctx.bindings);
          if (typeof field !== "string") throw new ReplaceFailed(`replacements[${i}].field: ${field.error}`);
          if (!isField(field)) throw new ReplaceFailed(`replacements[${i}].field: '${field}' ${FIELD_ERROR}`);
          out.push({ ...prepared[i]!, field });
        }
        if (res.streamRewrites) res.streamRewrites.push(...out);
        else res.streamRewrites = out;
        return { kind: "continue", note: `${out.length} replacement${out.length === 1 ? "" : "s"} for each event` };
      },
    };
  },
});
