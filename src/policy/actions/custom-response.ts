/**
 * custom-response: the request is answered with this status, body and
 * headers (in on_http_response, instead of the service's response). The
 * body and header values take `${...}`. Without a content-type one is
 * inferred from the body, as ngrok does: HTML, JSON or plain text.
 * ngrok's pages write the body as `body` or, in older ones, `content`:
 * either is taken, not both.
 */
import * as v from "valibot";
import { compileHeaderMap, MAX_HEADERS_PER_ACTION, render, renderHeaderValue, statusCode } from "./common.ts";
import { defineAction } from "./types.ts";

/** The content-type of a body with none given. */
export function inferContentType(body: string): string {
  const t = body.trimStart();
  if (t.startsWith("<")) return "text/html; charset=utf-8";
  if (t.startsWith("{") || t.startsWith("[")) {
    try {
      JSON.parse(t);
      return "application/json";
    } catch {
      // not JSON after all
    }
  }
  return "text/plain; charset=utf-8";
}

export const customResponse = defineAction({
  type: "custom-response",
  phases: ["on_http_request", "on_http_response"],
  schema: v.pipe(
    v.strictObject({
      status_code: v.optional(statusCode(100, 599), 200),
      body: v.optional(v.string()),
      content: v.optional(v.string()),
      headers: v.optional(v.pipe(v.record(v.string(), v.string()), v.maxEntries(MAX_HEADERS_PER_ACTION))),
    }),
    v.check((c) => c.body === undefined || c.content === undefined, "body and content are one field (content is ngrok's older name): give one"),
  ),
  compile(config, tools) {
    const body = config.content !== undefined ? tools.template(config.content, ["content"]) : tools.template(config.body ?? "", ["body"]);
    const headers = compileHeaderMap(config.headers, "headers", tools);
    if (!body) return undefined;
    return {
      type: "custom-response",
      run(ctx) {
        const text = render(body, ctx, "body") ?? "";
        const out: [string, string][] = [];
        for (const [name, t] of headers) {
          const value = renderHeaderValue(t, ctx, name);
          if (value !== undefined) out.push([name, value]);
        }
        if (!out.some(([n]) => n === "content-type")) out.push(["content-type", inferContentType(text)]);
        return { kind: "respond", response: { status: config.status_code, headers: out, body: text }, note: `answered ${config.status_code}` };
      },
    };
  },
});
