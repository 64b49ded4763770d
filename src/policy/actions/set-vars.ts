/**
 * set-vars: values the later rules read as `vars.<name>`, in expressions
 * and in `${...}`, as ngrok has them: `vars` is a list of one-entry maps,
 * set in order (a value may read the ones before it). A value is any YAML
 * value (string, number, bool, null, list, map); a string that is exactly
 * one `${...}` keeps its expression's type (`${int(x)}` is an int), one
 * with text around its interpolations is text. Scoped as ngrok scopes
 * them: to the phase and the policy that set them; reading one never set
 * is an error, so the rule that reads it does not match.
 */
import { isCelError } from "@bufbuild/cel";
import * as v from "valibot";
import type { Template } from "../cel/template.ts";
import { defineAction, type ActionContext, type CompileTools } from "./types.ts";

/** Variables one action sets, at most. */
const MAX_VARS = 32;
/** A variable's name, at most. */
const MAX_NAME = 128;
/** How deep a value's lists and maps nest, at most. */
const MAX_DEPTH = 8;

/** A value as it was written, its strings compiled: made into a CEL value per run (or once, when it interpolates nothing). */
type ValuePlan =
  | { kind: "constant"; value: unknown }
  | { kind: "text"; template: Template }
  | { kind: "list"; items: ValuePlan[] }
  | { kind: "map"; entries: [string, ValuePlan][] };

/** What does not evaluate: the variable is left unset (told as a problem). */
const FAILED = Symbol("failed");

export const setVars = defineAction({
  type: "set-vars",
  phases: ["on_tcp_connect", "on_http_request", "on_http_response"],
  schema: v.strictObject({ vars: v.pipe(v.array(v.record(v.string(), v.unknown())), v.minLength(1), v.maxLength(MAX_VARS)) }),
  compile(config, tools) {
    const vars: [string, ValuePlan][] = [];
    let ok = true;
    config.vars.forEach((entry, i) => {
      const names = Object.keys(entry);
      if (names.length !== 1) {
        tools.error(["vars", i], `each entry of vars is one variable (a map of one name to its value); this one has ${names.length}`);
        ok = false;
        return;
      }
      const name = names[0]!;
      if (name.length === 0 || name.length > MAX_NAME) {
        tools.error(["vars", i], `a variable's name is 1 to ${MAX_NAME} characters`);
        ok = false;
        return;
      }
      const value = planOf(entry[name], ["vars", i, name], tools, 0);
      if (value === undefined) ok = false;
      else vars.push([name, value]);
    });
    if (!ok) return undefined;
    const names = vars.map(([n]) => n).join(", ");
    return {
      type: "set-vars",
      run(ctx) {
        for (const [name, plan] of vars) {
          const value = valueOf(plan, ctx, name);
          if (value !== FAILED) ctx.bindings.setVar(name, value);
        }
        return { kind: "continue", note: `set ${names}` };
      },
    };
  },
});

function planOf(value: unknown, at: (string | number)[], tools: CompileTools, depth: number): ValuePlan | undefined {
  if (depth > MAX_DEPTH) {
    tools.error(at, `a value nests lists and maps deeper than ${MAX_DEPTH} levels`);
    return undefined;
  }
  if (typeof value === "string") {
    const t = tools.template(value, at);
    if (!t) return undefined;
    return t.constant !== undefined ? { kind: "constant", value: t.constant } : { kind: "text", template: t };
  }
  // a whole number is CEL's int (`vars.n == 1`), any other a double
  if (typeof value === "number") return { kind: "constant", value: Number.isSafeInteger(value) ? BigInt(value) : value };
  if (typeof value === "boolean" || value === null || value === undefined) return { kind: "constant", value: value ?? null };
  if (Array.isArray(value)) {
    const items: ValuePlan[] = [];
    for (let i = 0; i < value.length; i++) {
      const item = planOf(value[i], [...at, i], tools, depth + 1);
      if (!item) return undefined;
      items.push(item);
    }
    return constantOr({ kind: "list", items });
  }
  if (typeof value === "object") {
    const entries: [string, ValuePlan][] = [];
    for (const [k, x] of Object.entries(value as Record<string, unknown>)) {
      const item = planOf(x, [...at, k], tools, depth + 1);
      if (!item) return undefined;
      entries.push([k, item]);
    }
    return constantOr({ kind: "map", entries });
  }
  tools.error(at, "a variable's value is a string, a number, a bool, null, a list or a map");
  return undefined;
}

/** A list or map of constants made once, at load. */
function constantOr(plan: ValuePlan): ValuePlan {
  if (plan.kind === "list" && plan.items.every((p) => p.kind === "constant")) return { kind: "constant", value: plan.items.map((p) => (p as { value: unknown }).value) };
  if (plan.kind === "map" && plan.entries.every(([, p]) => p.kind === "constant")) return { kind: "constant", value: new Map(plan.entries.map(([k, p]) => [k, (p as { value: unknown }).value])) };
  return plan;
}

function valueOf(plan: ValuePlan, ctx: ActionContext, name: string): unknown {
  switch (plan.kind) {
    case "constant":
      return plan.value;
    case "text": {
      const only = plan.template.only;
      if (only) {
        const v = only.evaluate(ctx.bindings);
        if (!isCelError(v)) return v;
        ctx.problem(`vars.${name}: \${${only.text}}: ${v.message}`);
        return FAILED;
      }
      const out = plan.template.render(ctx.bindings);
      if (typeof out === "string") return out;
      ctx.problem(`vars.${name}: ${out.error}`);
      return FAILED;
    }
    case "list": {
      const out: unknown[] = [];
      for (const item of plan.items) {
        const v = valueOf(item, ctx, name);
        if (v === FAILED) return FAILED;
        out.push(v);
      }
      return out;
    }
    case "map": {
      const out = new Map<string, unknown>();
      for (const [k, item] of plan.entries) {
        const v = valueOf(item, ctx, name);
        if (v === FAILED) return FAILED;
        out.set(k, v);
      }
      return out;
    }
  }
}
