/** What several actions' configs share: header maps, status codes, strings with interpolation, durations. */
import * as v from "valibot";
import { headerProblem } from "../../validate/access.ts";
import type { Template } from "../cel/template.ts";
import type { ActionContext, CompileTools } from "./types.ts";

/** ngrok's cap on the headers one action adds or removes. */
export const MAX_HEADERS_PER_ACTION = 10;

/** A header value as the edge may write it: no CR, LF or NUL. */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\uffff]*$/;

export const statusCode = (min: number, max: number) => v.pipe(v.number(), v.integer(), v.minValue(min), v.maxValue(max));

export const headerMap = v.pipe(v.record(v.string(), v.string()), v.minEntries(1), v.maxEntries(MAX_HEADERS_PER_ACTION));

/** A boolean as ngrok's YAML has it. */
export const flag = v.optional(v.boolean(), true);

/** Header names checked as today's --request-header-add/remove rules are (validate/access.ts): a token, none the edge owns. */
export function checkHeaderName(name: string, at: (string | number)[], tools: CompileTools): void {
  const problem = headerProblem(name);
  if (problem) tools.error(at, problem);
}

/** The constant header values seen to be ones the edge may write. */
const goodConstants = new WeakSet<Template>();

/** Each value of a header map compiled (interpolation), each name checked. */
export function compileHeaderMap(headers: Record<string, string> | undefined, field: string, tools: CompileTools): [string, Template][] {
  const out: [string, Template][] = [];
  for (const [name, value] of Object.entries(headers ?? {})) {
    checkHeaderName(name, [field, name], tools);
    const t = tools.template(value, [field, name]);
    if (t?.constant !== undefined && HEADER_VALUE.test(t.constant)) goodConstants.add(t);
    if (t) out.push([name.toLowerCase(), t]);
  }
  return out;
}

/** The header map's fields when every value is a good constant (renderHeaderValue returns it as it is), else undefined. */
export function constantHeaders(headers: readonly [string, Template][]): [string, string][] | undefined {
  const out: [string, string][] = [];
  for (const [name, t] of headers) {
    if (t.constant === undefined || !goodConstants.has(t)) return undefined;
    out.push([name, t.constant]);
  }
  return out;
}

/** A template's text for this request, or undefined (told to the run as a problem) when it fails. */
export function render(t: Template, ctx: ActionContext, what: string): string | undefined {
  const out = t.render(ctx.bindings);
  if (typeof out === "string") return out;
  ctx.problem(`${what}: ${out.error}`);
  return undefined;
}

/** A header value rendered, or undefined when it fails or would break the head (a line break in it). */
export function renderHeaderValue(t: Template, ctx: ActionContext, name: string): string | undefined {
  // a constant was made at load: a good one needs no check per request
  if (t.constant !== undefined && goodConstants.has(t)) return t.constant;
  const out = render(t, ctx, `header ${name}`);
  if (out === undefined) return undefined;
  // the same value as the last one checked (the same visitor's address, request after request): good already
  if (out === lastGoodValue) return out;
  if (!HEADER_VALUE.test(out)) {
    ctx.problem(`header ${name}: its value has a line break or a control character, so it is left out`);
    return undefined;
  }
  lastGoodValue = out;
  return out;
}

/** The last rendered header value seen to be one the edge may write. */
let lastGoodValue: string | undefined;

/** A Go duration ("90s", "10m", "1h30m", "500ms") in ms, or undefined. */
export function parseDuration(text: string): number | undefined {
  if (!/^(\d+(\.\d+)?(ms|s|m|h))+$/.test(text)) return undefined;
  let total = 0;
  for (const m of text.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)) total += Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] as "ms" | "s" | "m" | "h"];
  return total;
}
