/**
 * http-request: the edge makes a request of its own, as ngrok's action
 * does, and the later rules read what came back under
 * `actions.ngrok.http_request.*` (req, res, attempts, error). The URL,
 * header values, query parameters and body take `${...}`. A request that
 * fails (no answer, too slow, too large, refused address) is told in
 * `error`; `on_error: halt` then ends the run with 502 (504 for a
 * timeout), `continue` (the default) goes on. Any answer, a 500 too, is
 * an answer: the rules judge its status; `retry_condition` may ask for
 * more attempts (http-request-retry.ts). The request itself is the
 * edge's (services.httpRequests): where it may go and its bounds are the
 * server's --policy-http-request-* flags.
 */
import * as v from "valibot";
import type { Template } from "../cel/template.ts";
import type { CompiledExpression } from "../cel/compile.ts";
import { HTTP_REQUEST_ERRORS, type HttpRequestErrorCode, type OutgoingAnswer, type OutgoingRequest, type OutgoingResult, tunnelKey } from "../http-client.ts";
import { MAX_RETRIES, RETRY_CONDITION, retryWanted } from "./http-request-retry.ts";
import { compileHeaderMap, MAX_HEADERS_PER_ACTION, parseDuration, render, renderHeaderValue } from "./common.ts";
import { defineAction, textResponse, type ActionContext, type ActionResult } from "./types.ts";

/** ngrok's bounds. */
const MIN_TIMEOUT_MS = 1000;
const MAX_TIMEOUT_MS = 30_000;
const MAX_QUERY_PARAMS = 32;
/** A URL, as written or as interpolated, at most: past it, no server reads it anyway. */
const MAX_URL_LENGTH = 8192;
/** How many http-request actions one visitor's request may pass through before the next refuses (ngrok's loop protection: 3). */
export const MAX_HOPS = 3;
/** The header that counts them: each request the action makes carries the count it came with, plus one. */
export const HOPS_HEADER = "burrow-http-request-hops";

const METHODS = ["GET", "PUT", "POST", "PATCH", "DELETE", "OPTIONS"] as const;

const schema = v.strictObject({
  url: v.pipe(v.string(), v.minLength(1), v.maxLength(MAX_URL_LENGTH)),
  method: v.optional(v.picklist(METHODS), "GET"),
  query_params: v.optional(
    v.pipe(v.array(v.strictObject({ key: v.pipe(v.string(), v.minLength(1), v.maxLength(128)), value: v.pipe(v.string(), v.maxLength(8192)) })), v.maxLength(MAX_QUERY_PARAMS)),
    [],
  ),
  headers: v.optional(v.pipe(v.record(v.string(), v.string()), v.maxEntries(MAX_HEADERS_PER_ACTION))),
  body: v.optional(v.string()),
  // ngrok's behaviour section: redirects are not followed unless asked for (its table says 10; its text, 0)
  max_redirects: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(100)), 0),
  timeout: v.optional(v.string(), "3s"),
  retry_condition: v.optional(v.string()),
  on_error: v.optional(v.picklist(["continue", "halt"]), "continue"),
});

/** Why a URL (as written, or as interpolated) cannot be requested, or undefined. */
export function urlProblem(text: string): string | undefined {
  if (text.length > MAX_URL_LENGTH) return `the URL is longer than ${MAX_URL_LENGTH} characters`;
  const url = URL.parse(text);
  if (!url) return "not a URL: give http(s)://host[:port]/path";
  if (url.protocol !== "http:" && url.protocol !== "https:") return "the URL must start with http:// or https://";
  if (url.hostname === "") return "the URL has no host";
  if (url.username !== "" || url.password !== "") return "the URL must not carry a user or password: send them in a header (authorization)";
  return undefined;
}

export const httpRequest = defineAction({
  type: "http-request",
  phases: ["on_http_request", "on_http_response"],
  schema,
  compile(config, tools) {
    const url = tools.template(config.url, ["url"]);
    const constantUrl = url?.constant;
    const problem = constantUrl !== undefined ? urlProblem(constantUrl) : undefined;
    if (problem) tools.error(["url"], `'${constantUrl}': ${problem}`);
    const timeoutMs = parseDuration(config.timeout);
    if (timeoutMs === undefined || timeoutMs < MIN_TIMEOUT_MS || timeoutMs > MAX_TIMEOUT_MS) tools.error(["timeout"], `'${config.timeout}' is not a duration from 1s to 30s, such as 3s`);
    // its own variables (the attempts), checked at load; "false", ngrok's default, is one attempt with nothing to evaluate
    const asked = config.retry_condition !== undefined && config.retry_condition.trim() !== "false";
    const retry = asked ? tools.expression(config.retry_condition!, ["retry_condition"], "condition", RETRY_CONDITION) : undefined;
    if (config.body !== undefined && config.method === "GET") tools.error(["body"], "a GET request has no body: use POST, PUT or PATCH");
    // the loop count is the edge's to keep: a policy that set it could make its requests loop
    for (const name of Object.keys(config.headers ?? {})) if (name.toLowerCase() === HOPS_HEADER) tools.error(["headers", name], `the header ${HOPS_HEADER} is set by the edge (it counts the requests a visitor's has caused)`);
    const headers = compileHeaderMap(config.headers, "headers", tools);
    const query = config.query_params.map((p, i) => [tools.template(p.key, ["query_params", i, "key"]), tools.template(p.value, ["query_params", i, "value"])] as const);
    const body = config.body === undefined ? undefined : tools.template(config.body, ["body"]);
    if (!url || problem || timeoutMs === undefined || query.some(([k, x]) => !k || !x) || (config.body !== undefined && !body) || (asked && !retry)) return undefined;
    const plan: RequestPlan = { url, method: config.method, headers, query: query as [Template, Template][], body, timeoutMs, maxRedirects: config.max_redirects, halt: config.on_error === "halt", retry };
    return { type: "http-request", run: (ctx) => send(plan, ctx) };
  },
});

interface RequestPlan {
  url: Template;
  method: string;
  headers: [string, Template][];
  query: [Template, Template][];
  body?: Template;
  timeoutMs: number;
  maxRedirects: number;
  halt: boolean;
  /** retry_condition, compiled; none: one attempt. */
  retry?: CompiledExpression;
}

/** The request as this run makes it, or the error code and why not. */
function requestOf(plan: RequestPlan, ctx: ActionContext): OutgoingRequest | { code: HttpRequestErrorCode; message: string } {
  const text = render(plan.url, ctx, "http-request url");
  if (text === undefined) return { code: HTTP_REQUEST_ERRORS.INTERPOLATION, message: "the URL did not interpolate" };
  const problem = urlProblem(text);
  if (problem) return { code: HTTP_REQUEST_ERRORS.BAD_URL, message: problem };
  const url = new URL(text);
  for (const [key, value] of plan.query) {
    const k = render(key, ctx, "http-request query_params key");
    const x = render(value, ctx, "http-request query_params value");
    if (k !== undefined && x !== undefined) url.searchParams.append(k, x);
  }
  const headers: [string, string][] = [];
  for (const [name, t] of plan.headers) {
    const value = renderHeaderValue(t, ctx, name);
    if (value !== undefined) headers.push([name, value]);
  }
  const hops = Number(ctx.bindings.req().header(HOPS_HEADER) ?? "0");
  if (Number.isInteger(hops) && hops >= MAX_HOPS) return { code: HTTP_REQUEST_ERRORS.LOOP, message: `the visitor's request came through ${hops} http-request actions already` };
  // what ngrok adds, unless the policy gave its own: who asked (the visitor's address) and a user agent; and the loop count, always
  if (!headers.some(([n]) => n === "user-agent")) headers.push(["user-agent", "burrow/http-request"]);
  if (!headers.some(([n]) => n === "x-forwarded-for")) headers.push(["x-forwarded-for", ctx.bindings.input.conn.clientIp]);
  headers.push([HOPS_HEADER, String(Number.isInteger(hops) && hops > 0 ? hops + 1 : 1)]);
  const body = plan.body === undefined ? undefined : render(plan.body, ctx, "http-request body");
  if (plan.body !== undefined && body === undefined) return { code: HTTP_REQUEST_ERRORS.INTERPOLATION, message: "the body did not interpolate" };
  return { method: plan.method, url: url.href, headers, body, timeoutMs: plan.timeoutMs, maxRedirects: plan.maxRedirects, tunnel: tunnelKey(ctx.bindings.input.tunnel) };
}

/** A header list as ngrok's variables have it: lower-case name to its values. */
function headerMap(headers: readonly [string, string][]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const [n, x] of headers) {
    const values = out.get(n);
    if (values) values.push(x);
    else out.set(n, [x]);
  }
  return out;
}

/** Requests each run has made (a run is its bindings: one object a phase of a policy); every attempt counts. */
const made = new WeakMap<object, number>();

async function send(plan: RequestPlan, ctx: ActionContext): Promise<ActionResult> {
  const request = requestOf(plan, ctx);
  if ("code" in request) return failed(plan, ctx, undefined, request.code, request.message);
  const req = { method: request.method, header: headerMap(request.headers), url: request.url, body: request.body ?? "" };
  const client = ctx.services.httpRequests;
  if (!client) return failed(plan, ctx, req, HTTP_REQUEST_ERRORS.UNAVAILABLE, "this server makes no requests for a policy");
  // the host, never the path or query (they may carry a token)
  const where = `${request.method} ${new URL(request.url).host}`;
  // the action's timeout is the whole exchange's, every attempt's together (ngrok's)
  const deadline = performance.now() + Math.min(plan.timeoutMs, client.maxTimeoutMs);
  const answers: OutgoingAnswer[] = [];
  let result: OutgoingResult | undefined;
  let attempts = 0;
  let capped = false;
  for (;;) {
    const count = made.get(ctx.bindings) ?? 0;
    if (count >= client.maxPerRun) {
      capped = true;
      break;
    }
    made.set(ctx.bindings, count + 1);
    attempts++;
    result = await client.send(attempts === 1 ? request : { ...request, timeoutMs: Math.max(1, Math.round(deadline - performance.now())) });
    if (result.ok) answers.push(result.answer);
    if (!plan.retry || attempts > MAX_RETRIES || deadline - performance.now() < 1) break;
    const facts = result.ok ? { attempts, req, res: response(result.answer) } : { attempts, req, error: `${result.code}: ${result.message}` };
    const wanted = retryWanted(plan.retry, facts, ctx.bindings);
    if (wanted.problem) ctx.problem(wanted.problem);
    if (!wanted.retry) break;
  }
  const tries = attempts > 1 ? ` (${attempts} attempts${capped ? ", the run's cap of requests stopped another" : ""})` : "";
  if (!result) return failed(plan, ctx, req, HTTP_REQUEST_ERRORS.TOO_MANY, `this run made ${client.maxPerRun} requests already (--policy-http-request-max-per-run)`);
  if (!result.ok) return failed(plan, ctx, req, result.code, `${result.message}${tries}`, where, answers);
  const a = result.answer;
  ctx.setVariables("http_request", { req, res: response(a), attempts: answers.map(attempt) });
  return { kind: "continue", note: `${where}: ${a.status} in ${a.timeMs} ms${tries}` };
}

function response(a: OutgoingAnswer) {
  return { resolved_ip: a.resolvedIp, header: headerMap(a.headers), status_code: BigInt(a.status), time_ms: BigInt(a.timeMs), body: a.body };
}

function attempt(a: OutgoingAnswer) {
  return { resolved_ip: a.resolvedIp, response_header: headerMap(a.headers), response_status_code: BigInt(a.status), response_time_ms: BigInt(a.timeMs) };
}

/** A request that got no usable answer: told in the variables; halt ends the run (502, 504 for a timeout), continue goes on. */
function failed(plan: RequestPlan, ctx: ActionContext, req: unknown, code: HttpRequestErrorCode, message: string, where = "http-request", answers: OutgoingAnswer[] = []): ActionResult {
  ctx.setVariables("http_request", { ...(req ? { req } : {}), attempts: answers.map(attempt), error: { code, message } });
  const note = `${where} failed: ${code}: ${message}`;
  if (!plan.halt) return { kind: "continue", note };
  ctx.problem(note);
  const timeout = code === HTTP_REQUEST_ERRORS.TIMEOUT;
  return { kind: "respond", response: textResponse(timeout ? 504 : 502, timeout ? "Gateway Timeout: a request the traffic policy makes took too long.\n" : "Bad Gateway: a request the traffic policy makes failed.\n"), note };
}
