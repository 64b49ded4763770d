/**
 * deny: the request is answered with `status_code` (default 403) and no
 * body, as ngrok does (custom-response is the one with a body); in
 * on_tcp_connect the connection is closed.
 */
import * as v from "valibot";
import { statusCode } from "./common.ts";
import { defineAction } from "./types.ts";

export const deny = defineAction({
  type: "deny",
  phases: ["on_tcp_connect", "on_http_request"],
  schema: v.strictObject({ status_code: v.optional(statusCode(100, 599), 403) }),
  compile(config, tools) {
    if (tools.phase === "on_tcp_connect") return { type: "deny", run: () => ({ kind: "close", note: "denied" }) };
    const status = config.status_code;
    return { type: "deny", run: () => ({ kind: "respond", response: { status, headers: [], body: "" }, note: `denied with ${status}` }) };
  },
});
