/**
 * A phase's conditions as one function: which rule, from a given one on,
 * is the next whose expressions all hold. Each expression with a fast path
 * (cel/fast.ts) is written into it as code, in the rules' order, so a
 * request's conditions run as one piece of code the JIT compiles whole,
 * with each variable's read a call it can inline: not a loop calling one
 * closure per expression from the same place, which the JIT cannot inline
 * and whose closures call closures again.
 *
 * The function only tells where the run goes: an expression whose fast
 * path has no answer (CEL would end in an error there), or that has no
 * fast path at all, hands its rule back to the run (policy.ts), which
 * judges it expression by expression as before, CEL's errors and costs
 * included. The function reads the run's state and changes nothing, so a
 * rule it hands back is judged on the same state.
 */
import type { Bindings } from "./context.ts";
import type { CompiledExpression } from "./cel/compile.ts";
import { CodeScope, fastCode } from "./cel/fast.ts";
import type { Phase } from "./variables.ts";

/**
 * The first rule at `from` or after whose expressions all hold: its index;
 * the number of rules when none does; `-1 - i` when rule `i` must be judged
 * by the run itself (its expressions need CEL).
 */
export type PhaseMatcher = (b: Bindings, from: number) => number;

/** What the matcher reads of a rule (policy.ts CompiledRule): its expressions. */
export interface RuleConditions {
  readonly expressions: readonly CompiledExpression[];
}

/** Past this much code a phase is not written as one function (a JIT compiles a function past some size at its lowest tier only): the run judges each rule itself. */
const MAX_SOURCE = 256 * 1024;

export function phaseMatcher(rules: readonly RuleConditions[], phase: Phase): PhaseMatcher {
  const scope = new CodeScope();
  const n = rules.length;
  let body = "";
  for (let i = 0; i < n; i++) {
    body += `case ${i}: m${i}: {\n${ruleCode(rules[i]!, i, phase, scope)}}\n`;
    if (body.length > MAX_SOURCE) return eachRuleByTheRun(n);
  }
  // `v` holds each expression's value (temporaries t0... are the expressions' own)
  return scope.make<PhaseMatcher>("b, from", `let v;\nswitch (from) {\n${body}}\nreturn ${n};`);
}

/**
 * One rule's test, in a block labelled `m<i>`: left by `break` when an
 * expression is false (the next rule's case follows), `return i` when all
 * are true, `return -1 - i` at the first without an answer.
 */
function ruleCode(rule: RuleConditions, i: number, phase: Phase, scope: CodeScope): string {
  let code = "";
  for (const e of rule.expressions) {
    const fast = e.tree && fastCode(e.tree, phase, scope);
    if (fast === undefined) return `${code}return ${-1 - i};\n`;
    code += `if ((v = ${fast}) !== true) { if (v === false) break m${i}; return ${-1 - i}; }\n`;
  }
  return `${code}return ${i};\n`;
}

/** A matcher that hands every rule to the run. */
function eachRuleByTheRun(n: number): PhaseMatcher {
  return (_b, from) => (from < n ? -1 - from : n);
}
