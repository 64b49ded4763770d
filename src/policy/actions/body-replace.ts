/**
 * What request-body-find-replace and response-body-find-replace share:
 * `replacements`, a list of `{ from, to }` as ngrok writes it, `from` an
 * RE2 pattern (regex.ts: linear-time matching, Go's leftmost-first and
 * its `$1`, `${1}`, `$name`, `$$` in `to`), both with `${...}`. A
 * constant pattern is compiled at load (a bad one refuses the policy at
 * its path); an interpolated one when the action runs. Each rule replaces
 * every match, in order, each on the previous one's result.
 *
 * A body is text for these actions: it is read as UTF-8, and one that is
 * not (an image, a protobuf) is not rewritten. Replacing is bounded: the
 * rules that rewrite a body together (an action's; a response's, all of
 * them) may take the policy's maxPatternSteps and BODY_STEPS_PER_CHAR more
 * for each character of the body (a pattern led by a literal takes next to
 * nothing, another two or three a character), so a pattern of quadratic
 * cost on a crafted body, or many rules on a large one, fail the action
 * instead of holding the edge (a few seconds at most, at the default caps,
 * on the largest body); so does a rewrite that
 * would grow the body past twice its size (MAX_GROWTH more for a small one).
 */
import * as v from "valibot";
import type { Template } from "../cel/template.ts";
import { Regex, RegexTooSlow, ReplaceTooLong } from "../regex.ts";
import { compiledPattern } from "./rewrite-url.ts";
import type { ActionContext, CompileTools } from "./types.ts";
import type { Replacement } from "../message.ts";

/** Steps the rules of a body may take for each of its characters, beyond the policy's maxPatternSteps. */
export const BODY_STEPS_PER_CHAR = 8;

/**
 * How much the rules may grow a body, together: to twice its size, or by
 * MAX_GROWTH characters for a small one. A short pattern made into a long
 * text at every match would otherwise make gigabytes of a megabyte.
 */
export const MAX_GROWTH = 1024 * 1024;

/** The most rules one action may have (ngrok's cap is not documented; this bounds the work a body gets). */
export const MAX_REPLACEMENTS = 64;

export const replacementsSchema = v.strictObject({
  replacements: v.pipe(
    v.array(v.strictObject({ from: v.pipe(v.string(), v.minLength(1, "`from` is the pattern to find: it cannot be empty")), to: v.optional(v.string(), "") })),
    v.minLength(1, "at least one replacement"),
    v.maxLength(MAX_REPLACEMENTS, `at most ${MAX_REPLACEMENTS} replacements`),
  ),
});

/** One rule compiled: its pattern (made at load when constant) and its replacement. */
interface CompiledReplacement {
  from: Template;
  fixed?: Regex;
  to: Template;
}

export type { Replacement };

export function compileReplacements(config: { replacements: { from: string; to: string }[] }, tools: CompileTools): CompiledReplacement[] | undefined {
  const out: CompiledReplacement[] = [];
  let ok = true;
  config.replacements.forEach((r, i) => {
    const from = tools.template(r.from, ["replacements", i, "from"]);
    const to = tools.template(r.to, ["replacements", i, "to"]);
    if (!from || !to) return void (ok = false);
    let fixed: Regex | undefined;
    if (from.constant !== undefined) {
      const re = Regex.compile(from.constant, tools.limits.maxPatternLength);
      if ("error" in re) {
        tools.error(["replacements", i, "from"], re.error);
        ok = false;
        return;
      }
      fixed = re;
    }
    out.push({ from, fixed, to });
  });
  return ok ? out : undefined;
}

/** Why a rule could not be made or applied this run: the action fails (a 500), never passes the body unrewritten. */
export class ReplaceFailed extends Error {
  override name = "ReplaceFailed";
}

/** The rules for this run, their `${...}` evaluated and their patterns compiled; throws ReplaceFailed when one fails. */
export function prepareReplacements(rules: readonly CompiledReplacement[], ctx: ActionContext): Replacement[] {
  const out: Replacement[] = [];
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    let re: Regex | { error: string } | undefined = rule.fixed;
    if (!re) {
      const pattern = rule.from.render(ctx.bindings);
      if (typeof pattern !== "string") throw new ReplaceFailed(`replacements[${i}].from: ${pattern.error}`);
      re = compiledPattern(pattern, ctx.bindings.caps.maxPatternLength);
      if ("error" in re) throw new ReplaceFailed(`replacements[${i}].from: ${re.error}`);
    }
    const to = rule.to.render(ctx.bindings);
    if (typeof to !== "string") throw new ReplaceFailed(`replacements[${i}].to: ${to.error}`);
    out.push({ re, to, steps: ctx.bindings.caps.maxPatternSteps });
  }
  return out;
}

/** A response that has no body to rewrite: a HEAD's, an interim one, a 204 or 304. */
export function responseWithoutBody(ctx: ActionContext): boolean {
  const status = ctx.bindings.res().status;
  return ctx.bindings.req().method === "HEAD" || status === 204 || status === 304 || status < 200;
}

/** The coding the service gave the response's body, when it is not identity (lower case), else undefined. */
export function serviceCoding(ctx: ActionContext): string | undefined {
  const coding = ctx.bindings.res().sentHeader("content-encoding")?.trim().toLowerCase();
  return coding && coding !== "identity" ? coding : undefined;
}

const utf8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** The body as text, or undefined when it is not UTF-8. */
export function bodyText(body: Uint8Array): string | undefined {
  try {
    return utf8.decode(body);
  } catch {
    return undefined;
  }
}

/**
 * `text` with every rule applied in order; throws ReplaceFailed when they
 * take more than their steps together, or grow it past twice its size (or
 * `growth` more, for a small one: MAX_GROWTH for a body; an event of a
 * stream has its own, smaller, sse-find-replace.ts).
 */
export function replaceAll(text: string, rules: readonly Replacement[], growth = MAX_GROWTH, what = "body"): string {
  const maxLength = Math.max(2 * text.length, text.length + growth);
  let base = 0;
  for (const r of rules) base = Math.max(base, r.steps);
  const steps = base + BODY_STEPS_PER_CHAR * text.length;
  // one budget for every rule: many rules on a large body cost no more than one
  const budget = { steps };
  for (let i = 0; i < rules.length; i++) {
    const { re, to } = rules[i]!;
    try {
      text = re.replaceAll(text, to, budget, maxLength);
    } catch (err) {
      if (err instanceof ReplaceTooLong) throw new ReplaceFailed(`replacements[${i}]: the ${what} would grow past ${maxLength} characters (twice its size, or ${growth} more)`);
      if (!(err instanceof RegexTooSlow)) throw err;
      throw new ReplaceFailed(`replacements[${i}].from: the rules took more than ${steps} steps on this ${what}`);
    }
  }
  return text;
}
