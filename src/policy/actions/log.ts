/**
 * log: fields (values with `${...}`) put on the request's record: the
 * inspector shows them and the server writes them in its structured log.
 * A field takes any JSON value, as ngrok's metadata does: a number, a
 * bool or null the policy wrote stays one there, a map or a list stays one
 * (its members keep their types too); a string is text, interpolated,
 * wherever it is. A value that fails to evaluate is logged empty, and the
 * failure is told.
 *
 * Bounded at load: the metadata's size as written and how deeply its maps
 * and lists nest (limits.ts). A map or list without an interpolation in
 * it is made once, at load, and the same frozen value is logged each time
 * (the inspector's note makes its own form of it once too: policy-notes.ts).
 */
import * as v from "valibot";
import type { Template } from "../cel/template.ts";
import type { LogValue } from "../outcome.ts";
import { render } from "./common.ts";
import { defineAction, type ActionContext, type CompileTools } from "./types.ts";
import type { PathKey } from "../document.ts";

/** Fields of one log action. */
const MAX_FIELDS = 32;

/** A field's value as written: constants made at load, its strings compiled. */
type FieldPlan =
  | { kind: "constant"; value: LogValue }
  | { kind: "text"; template: Template; at: string }
  | { kind: "list"; items: FieldPlan[] }
  | { kind: "map"; entries: [string, FieldPlan][] };

export const log = defineAction({
  type: "log",
  phases: ["on_tcp_connect", "on_http_request", "on_http_response"],
  schema: v.strictObject({ metadata: v.pipe(v.record(v.string(), v.unknown()), v.maxEntries(MAX_FIELDS)) }),
  compile(config, tools) {
    const { maxLogMetadataBytes, maxLogMetadataDepth } = tools.limits;
    const size = Buffer.byteLength(JSON.stringify(config.metadata) ?? "");
    if (size > maxLogMetadataBytes) {
      tools.error(["metadata"], `the metadata is ${size} bytes as JSON; a log action's may have ${maxLogMetadataBytes} at most`);
      return undefined;
    }
    const fields: [string, FieldPlan][] = [];
    for (const [name, value] of Object.entries(config.metadata)) {
      const plan = planOf(value, ["metadata", name], name, tools, 0, maxLogMetadataDepth);
      if (!plan) return undefined;
      fields.push([name, plan]);
    }
    return {
      type: "log",
      run(ctx) {
        const out: Record<string, LogValue> = {};
        for (const [name, plan] of fields) out[name] = plan.kind === "constant" ? plan.value : valueOf(plan, ctx);
        ctx.log(out);
        ctx.setVariables("log", { metadata: out });
        return { kind: "continue", note: "logged" };
      },
    };
  },
});

/** `depth`: the maps and lists `value` is inside of (a field's own value: 0). */
function planOf(value: unknown, at: PathKey[], where: string, tools: CompileTools, depth: number, maxDepth: number): FieldPlan | undefined {
  if (typeof value === "string") {
    const t = tools.template(value, at);
    if (!t) return undefined;
    return t.constant !== undefined ? { kind: "constant", value: t.constant } : { kind: "text", template: t, at: `metadata.${where}` };
  }
  if (typeof value === "number") {
    if (Number.isFinite(value)) return { kind: "constant", value };
    tools.error(at, "a number in the metadata is finite");
    return undefined;
  }
  if (typeof value === "boolean" || value === null) return { kind: "constant", value };
  if (typeof value !== "object" || value === undefined) {
    tools.error(at, "a metadata value is a string, a number, a bool, null, a list or a map");
    return undefined;
  }
  if (depth >= maxDepth) {
    tools.error(at, `the metadata nests lists and maps deeper than ${maxDepth} levels`);
    return undefined;
  }
  if (Array.isArray(value)) {
    const items: FieldPlan[] = [];
    for (let i = 0; i < value.length; i++) {
      const item = planOf(value[i], [...at, i], `${where}[${i}]`, tools, depth + 1, maxDepth);
      if (!item) return undefined;
      items.push(item);
    }
    return items.every(isConstant) ? { kind: "constant", value: Object.freeze(items.map((p) => p.value)) as LogValue[] } : { kind: "list", items };
  }
  const entries: [string, FieldPlan][] = [];
  for (const [k, x] of Object.entries(value as Record<string, unknown>)) {
    const item = planOf(x, [...at, k], `${where}.${k}`, tools, depth + 1, maxDepth);
    if (!item) return undefined;
    entries.push([k, item]);
  }
  return entries.every(([, p]) => isConstant(p)) ? { kind: "constant", value: Object.freeze(Object.fromEntries(entries.map(([k, p]) => [k, (p as { value: LogValue }).value]))) } : { kind: "map", entries };
}

const isConstant = (p: FieldPlan): p is { kind: "constant"; value: LogValue } => p.kind === "constant";

/** A value made for this run: its strings interpolated (one that fails is empty), its constant parts as they were made at load. */
function valueOf(plan: FieldPlan, ctx: ActionContext): LogValue {
  switch (plan.kind) {
    case "constant":
      return plan.value;
    case "text":
      return render(plan.template, ctx, plan.at) ?? "";
    case "list":
      return plan.items.map((p) => valueOf(p, ctx));
    case "map": {
      const out: Record<string, LogValue> = {};
      for (const [k, p] of plan.entries) out[k] = valueOf(p, ctx);
      return out;
    }
  }
}
