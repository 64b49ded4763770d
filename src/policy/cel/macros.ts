/**
 * The macros a policy has beyond @bufbuild/cel's parser's: `sortBy`, as
 * cel-go's list extension defines it. The parser leaves
 * `list.sortBy(x, key)` a call; the checker (check.ts) checks it as the
 * macro it is, and the tree the planner gets has it expanded here into a
 * loop that pairs each element with its key, and the sort of the pairs:
 * `@sortByKeys(list.map(x, [x, key]))` (list-functions.ts). The loop is an
 * ordinary comprehension, so the step counter (compile.ts) pays for it.
 */
import { create, type MessageInitShape } from "@bufbuild/protobuf";
import { ExprSchema, type Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { SORT_BY_KEYS } from "./list-functions.ts";

/** The accumulator's name, as the parser's own macros name it (no expression can). */
const ACCU = "@result";

/** Whether `e` is a `list.sortBy(x, key)` call: a target, two arguments, the first a name. */
export function isSortBy(e: Expr): boolean {
  const k = e.exprKind;
  return k.case === "callExpr" && k.value.function === "sortBy" && k.value.target !== undefined && k.value.args.length === 2 && k.value.args[0]!.exprKind.case === "identExpr";
}

/** The tree with each sortBy expanded (in place; the root returned). */
export function expandMacros(root: Expr): Expr {
  let nextId = 0n;
  eachPart(root, (e) => {
    if (e.id >= nextId) nextId = e.id + 1n;
  });
  const node = (exprKind: MessageInitShape<typeof ExprSchema>["exprKind"]): Expr => create(ExprSchema, { id: nextId++, exprKind });
  const ident = (name: string) => node({ case: "identExpr", value: { name } });
  const list = (elements: Expr[]) => node({ case: "listExpr", value: { elements } });
  eachPart(root, (e) => {
    if (!isSortBy(e) || e.exprKind.case !== "callExpr") return;
    const call = e.exprKind.value;
    const x = call.args[0]!.exprKind.case === "identExpr" ? call.args[0]!.exprKind.value.name : "";
    const pairs = node({
      case: "comprehensionExpr",
      value: {
        iterVar: x,
        iterRange: call.target!,
        accuVar: ACCU,
        accuInit: list([]),
        loopCondition: node({ case: "constExpr", value: { constantKind: { case: "boolValue", value: true } } }),
        loopStep: node({ case: "callExpr", value: { function: "_+_", args: [ident(ACCU), list([list([ident(x), call.args[1]!])])] } }),
        result: ident(ACCU),
      },
    });
    e.exprKind = node({ case: "callExpr", value: { function: SORT_BY_KEYS, args: [pairs] } }).exprKind;
  });
  return root;
}

/** Calls `f` on each part of the tree, a part before its own parts. */
export function eachPart(e: Expr, f: (e: Expr) => void): void {
  f(e);
  const k = e.exprKind;
  if (k.case === "selectExpr" && k.value.operand) eachPart(k.value.operand, f);
  else if (k.case === "callExpr") {
    if (k.value.target) eachPart(k.value.target, f);
    for (const a of k.value.args) eachPart(a, f);
  } else if (k.case === "listExpr") for (const a of k.value.elements) eachPart(a, f);
  else if (k.case === "structExpr") {
    for (const en of k.value.entries) {
      if (en.keyKind.case === "mapKey") eachPart(en.keyKind.value, f);
      if (en.value) eachPart(en.value, f);
    }
  } else if (k.case === "comprehensionExpr") {
    const c = k.value;
    for (const part of [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]) if (part) eachPart(part, f);
  }
}
