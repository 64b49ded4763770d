/**
 * How captures look in the inspector API (snake_case, like the admin API).
 * The list carries no bodies; one capture's detail carries them base64
 * encoded, with a decoded copy when a Content-Encoding applies. All of this
 * is computed when asked for, never as requests pass.
 */
import type { HeaderList } from "../../protocol/messages.ts";
import type { TunnelView } from "../output.ts";
import type { BodyCapture } from "./body.ts";
import type { Capture } from "./capture.ts";
import { decodeBody } from "./decode.ts";
import { madeNote } from "./made-note.ts";

const headerValue = (headers: HeaderList | undefined, name: string) => headers?.find(([n]) => n.toLowerCase() === name)?.[1];
const ms = (x: number | undefined) => (x === undefined ? null : Math.round(x * 10) / 10);

export const tunnelJson = (t: TunnelView) => ({
  name: t.name,
  protocol: t.protocol,
  public_url: t.url,
  local: t.local,
  host_header: t.target.hostHeader ?? null,
  // a TCP tunnel carries no HTTP requests to capture
  inspect: t.protocol === "http" && t.inspect,
});

export function summaryJson(c: Capture) {
  return {
    id: c.id,
    tunnel: c.tunnel.name,
    kind: c.kind === "ws" ? "websocket" : "http",
    started_at: new Date(c.startedAt).toISOString(),
    remote: c.remote,
    method: c.head.method,
    path: c.head.path,
    status: c.status ?? null,
    state: c.state,
    error: c.error ?? null,
    duration_ms: ms(c.durationMs),
    request_size: c.requestBody.size,
    response_size: c.responseBody.size,
    replay_of: c.replayOf ?? null,
    route: c.route ?? null,
    websocket: c.ws ? { messages_from_visitor: c.ws.fromVisitor, messages_from_service: c.ws.fromService } : undefined,
    // answered by the server's traffic policies: it never reached this agent
    answered_by: c.answeredAtEdge ? ("edge" as const) : ("service" as const),
    // the server told what its traffic policies did with it (for one let through: a moment after its response)
    policy_noted: c.answeredAtEdge !== undefined || c.passedNote !== undefined || madeNote(c) !== undefined,
  };
}

/** The edge's field naming the tunnel's own rules that matched a request it sent on (edge/traffic-policy/layered-run.ts). */
const POLICY_RULES_FIELD = "x-burrow-policy-rules";

/**
 * What the tunnel's traffic policies did with the request, read when
 * someone looks. `rules`, `logs`: the request's phase (the tunnel's own
 * rules that matched, its log actions' fields); `ended`: the action that
 * answered in the service's place, in which phase, whose layer it was and
 * the status the visitor got; `response`: the response's phase (the rules
 * that matched, each with its actions, and the log fields); `events`: the
 * event stream's (on_event_stream_message, judged on the response's head:
 * its rules that matched, whose sse-find-replace rewrote the events). For one they
 * answered, the note the server sent; for one they let through, the note
 * the server sent after its response (POLICY_PASSED), the one made here
 * when the server sends none it need not (made-note.ts), or the rules the
 * server named in its field. Null when no rule of the tunnel's matched.
 */
function policyJson(c: Capture) {
  const note = c.answeredAtEdge;
  if (note) {
    const ended = { phase: "request" as const, ...note.ended, status: note.status };
    return { rules: note.rules, ended, logs: note.logs ?? [], skipped_before: note.skipped ?? 0, response: null, events: null };
  }
  const passed = c.passedNote ?? madeNote(c);
  const named = headerValue(c.head.headers, POLICY_RULES_FIELD);
  if (passed === undefined && named === undefined) return null;
  const rules = passed?.request ? passed.request.rules.map((r) => r.rule) : (named ?? "").split(",").map((r) => r.trim()).filter((r) => r !== "");
  const response = passed?.response;
  return {
    rules,
    ended: response?.ended ? { phase: "response" as const, ...response.ended, status: c.passedNote?.status ?? null } : null,
    logs: passed?.request?.logs ?? [],
    skipped_before: 0,
    response: response ? { rules: response.rules, logs: response.logs ?? [] } : null,
    events: passed?.events ? { rules: passed.events.rules, logs: passed.events.logs ?? [] } : null,
  };
}

function bodyJson(body: BodyCapture, headers: HeaderList | undefined) {
  const bytes = body.bytes();
  const decoded = bytes.byteLength > 0 ? decodeBody(bytes, headerValue(headers, "content-encoding")) : undefined;
  return {
    size: body.size,
    captured: body.captured,
    truncated: body.truncated,
    content_type: headerValue(headers, "content-type") ?? null,
    content_encoding: headerValue(headers, "content-encoding") ?? null,
    base64: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64"),
    decoded:
      decoded === undefined
        ? null
        : "error" in decoded
          ? { encoding: decoded.encoding, error: decoded.error }
          : { encoding: decoded.encoding, size: decoded.bytes.byteLength, base64: Buffer.from(decoded.bytes).toString("base64") },
  };
}

export function detailJson(c: Capture) {
  return {
    ...summaryJson(c),
    request: { method: c.head.method, path: c.head.path, headers: c.head.headers, body: bodyJson(c.requestBody, c.head.headers) },
    response: c.status === undefined ? null : { status: c.status, headers: c.responseHeaders ?? [], body: bodyJson(c.responseBody, c.responseHeaders) },
    policy: policyJson(c),
    websocket: c.ws
      ? {
          messages_from_visitor: c.ws.fromVisitor,
          messages_from_service: c.ws.fromService,
          bytes_from_visitor: c.ws.bytesFromVisitor,
          bytes_from_service: c.ws.bytesFromService,
          last_messages: c.ws.last.map((m) => ({
            from: m.from,
            at: new Date(m.at).toISOString(),
            type: m.text ? "text" : "binary",
            size: m.size,
            truncated: m.size > m.data.byteLength,
            ...(m.text ? { text: Buffer.from(m.data).toString("utf8") } : { base64: Buffer.from(m.data).toString("base64") }),
          })),
        }
      : undefined,
  };
}
