/**
 * What redirect and url-rewrite share: `from` (an RE2 pattern, default the
 * whole URL) matched against the request's full URL (scheme, host, path,
 * query), every match replaced by `to` with `$1`-style groups, after both
 * had their `${...}` evaluated. A constant pattern is compiled at load; an
 * interpolated one per request, kept in a small cache.
 */
import { Regex, RegexTooSlow } from "../regex.ts";
import type { Template } from "../cel/template.ts";
import { render } from "./common.ts";
import type { ActionContext, CompileTools } from "./types.ts";

/** Patterns made per request that are kept compiled. */
const PATTERN_CACHE_MAX = 256;
const patternCache = new Map<string, Regex | { error: string }>();

/** `pattern` compiled, or why not; one longer than `maxLength` (the running policy's cap) is refused before the cache, which every policy shares. */
export function compiledPattern(pattern: string, maxLength: number): Regex | { error: string } {
  if (pattern.length > maxLength) return { error: `the pattern is longer than ${maxLength} characters` };
  let re = patternCache.get(pattern);
  if (!re) {
    if (patternCache.size >= PATTERN_CACHE_MAX) patternCache.clear();
    re = Regex.compile(pattern, Infinity);
    patternCache.set(pattern, re);
  }
  return re;
}

export interface UrlRewrite {
  from?: Template;
  fixed?: Regex;
  to: Template;
}

export function compileRewrite(config: { from?: string; to: string }, tools: CompileTools): UrlRewrite | undefined {
  const to = tools.template(config.to, ["to"]);
  const from = config.from === undefined ? undefined : tools.template(config.from, ["from"]);
  let fixed: Regex | undefined;
  if (from?.constant !== undefined) {
    const re = Regex.compile(from.constant, tools.limits.maxPatternLength);
    if ("error" in re) tools.error(["from"], re.error);
    else fixed = re;
  }
  return to ? { from, fixed, to } : undefined;
}

/** The URL after the rewrite (undefined when an interpolation or a pattern failed), and the first match's groups. */
export function applyRewrite(r: UrlRewrite, url: string, ctx: ActionContext, what: string): { url: string; matches: string[] } | undefined {
  const to = render(r.to, ctx, `${what}.to`);
  if (to === undefined) return undefined;
  if (!r.from) return { url: to, matches: [url] };
  let re: Regex | { error: string } | undefined = r.fixed;
  if (!re) {
    const pattern = render(r.from, ctx, `${what}.from`);
    if (pattern === undefined) return undefined;
    re = compiledPattern(pattern, ctx.bindings.caps.maxPatternLength);
  }
  if ("error" in re) {
    ctx.problem(`${what}.from: ${re.error}`);
    return undefined;
  }
  // one budget for the match and the replace (the policy's maxPatternSteps): a pattern slow on this URL fails the action
  const steps = ctx.bindings.caps.maxPatternSteps;
  const budget = { steps };
  try {
    const matches = re.matchGroups(url, budget);
    if (!matches) return { url, matches: [] };
    return { url: re.replaceAll(url, to, budget), matches };
  } catch (err) {
    if (!(err instanceof RegexTooSlow)) throw err;
    ctx.problem(`${what}.from: the pattern took more than ${steps} steps on this URL`);
    return undefined;
  }
}
