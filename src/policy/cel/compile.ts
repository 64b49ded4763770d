/**
 * One CEL expression, compiled once at load: bounded in length and
 * nesting before it is parsed (the parser recurses), parsed, type-checked
 * against its phase's variables (check.ts), given its cost counter, and
 * planned by @bufbuild/cel. What comes out is evaluated per request with
 * nothing left to parse or check; what does not compile is a problem with
 * its position in the expression's text.
 *
 * The cost counter: each loop a macro expands into (`exists`, `all`,
 * `map`, `filter`, ...) gets its condition wrapped in `@step`, a function
 * no expression can name (`@` starts no identifier), which spends one unit
 * of the run's budget per step and ends the loop with an error past it.
 */
import { celEnv, celFunc, CelScalar, parse, plan, type CelEnv, type CelResult, type CelType } from "@bufbuild/cel";
import { create } from "@bufbuild/protobuf";
import { ExprSchema, type Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import type { PolicyLimits } from "../limits.ts";
import { phaseVariables, type Phase } from "../variables.ts";
import { CheckProblem, Checker } from "./check.ts";
import { Bindings } from "../context.ts";
import { charge, evaluating, type EvaluationScope } from "./evaluation.ts";
import { CodeScope, fastCode, type FastEvaluation } from "./fast.ts";
import { POLICY_FUNCTIONS } from "./functions.ts";
import { eachPart, expandMacros } from "./macros.ts";

/** The loop step counter the compiler wraps each macro's condition in. */
const STEP = "@step";
const stepFunction = celFunc(STEP, [CelScalar.BOOL], CelScalar.BOOL, (condition) => {
  charge(1);
  return condition;
});

export interface CompileProblem {
  kind: "syntax" | "type" | "complexity";
  message: string;
  /** 0-based offset in the expression's text. */
  offset: number;
}

/** What an expression is for: a rule's condition must be a bool; a value (a bucket key, an interpolation) may be anything. */
export type Purpose = "condition" | "value";

/** What an expression is evaluated against: the variables CEL reads, and the scope its functions reach. */
export interface EvaluationTarget extends EvaluationScope {
  readonly variables: object;
}

export interface CompiledExpression {
  readonly text: string;
  /** The result's type as the checker knows it. */
  readonly type: CelType;
  /** The estimated loop steps (the unit of PolicyLimits.costLimit). */
  readonly cost: number;
  /** Evaluates against a run's variables, its functions reaching `scope` (context.ts's Bindings is both): by the fast path when it has one and it answers, else by CEL. */
  evaluate(scope: EvaluationTarget): CelResult;
  /** Evaluates by @bufbuild/cel alone (what the fast path is checked against). */
  evaluateByCel(scope: EvaluationTarget): CelResult;
  /** The compiled fast path of its shape (cel/fast.ts), made when first asked for, or undefined: it has another. */
  readonly fast: FastEvaluation | undefined;
  /** The parsed tree of an expression with a fast path, which a phase's matcher writes its own code from (policy/phase-matcher.ts); undefined without one. */
  readonly tree: Expr | undefined;
  /** The variables it reads (`actions`: an action's results). */
  readonly reads: ReadonlySet<string>;
}

/**
 * The variables of an expression an action evaluates against values of
 * its own rather than a phase's (http-request's `retry_condition` reads
 * the attempts it made): declared once, as a phase's are, and checked the
 * same way. `name` is what a refusal calls it.
 */
export interface OwnVariables {
  readonly name: string;
  readonly variables: Readonly<Record<string, CelType>>;
}

/** Where an expression is evaluated: a phase of a policy, or an action's own variables. */
export type ExpressionScope = Phase | OwnVariables;

const environments = new Map<ExpressionScope, CelEnv>();

/** The environment of a phase (or an action's own variables): its variables, CEL's standard functions, the strings extension and ours. */
export function phaseEnvironment(scope: ExpressionScope): CelEnv {
  let env = environments.get(scope);
  if (!env) {
    env = celEnv({ variables: variablesOf(scope), funcs: [...POLICY_FUNCTIONS, stepFunction] });
    environments.set(scope, env);
  }
  return env;
}

const variablesOf = (scope: ExpressionScope) => (typeof scope === "string" ? phaseVariables(scope) : scope.variables);

export function compileExpression(text: string, phase: ExpressionScope, purpose: Purpose, limits: PolicyLimits): CompiledExpression | CompileProblem {
  if (text.length > limits.maxExpressionLength) {
    return { kind: "complexity", message: `the expression is longer than ${limits.maxExpressionLength} characters`, offset: limits.maxExpressionLength };
  }
  const deep = nestingPastLimit(text, limits.maxExpressionDepth);
  if (deep !== undefined) return { kind: "complexity", message: `the expression nests deeper than ${limits.maxExpressionDepth} levels`, offset: deep };
  if (text.trim() === "") return { kind: "syntax", message: "the expression is empty", offset: 0 };
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(text);
  } catch (err) {
    return syntaxProblem(err);
  }
  const positions = parsed.sourceInfo?.positions ?? {};
  const offsetOf = (id: bigint) => positions[id.toString()] ?? 0;
  const env = phaseEnvironment(phase);
  const checker = new Checker(env, variablesOf(phase), typeof phase === "string" ? phase : phase.name, { maxDepth: limits.maxExpressionDepth, maxNodes: limits.maxExpressionNodes, costLimit: limits.costLimit });
  let checked;
  try {
    checked = checker.check(parsed.expr);
  } catch (err) {
    if (err instanceof CheckProblem) return { kind: err.kind, message: err.message, offset: offsetOf(err.exprId) };
    if (err instanceof RangeError) return { kind: "complexity", message: "the expression nests too deeply", offset: 0 };
    throw err;
  }
  const t = checked.type;
  if (purpose === "condition" && !(t.kind === "scalar" && (t.scalar === "bool" || t.scalar === "dyn"))) {
    return { kind: "type", message: `a rule's expression must be true or false; this one is a ${t.toString()}`, offset: 0 };
  }
  // the fast path is read off the tree as parsed, before the step counter is woven into it (it knows the phases' variables
  // only); its function is made when first asked for (a value's, a condition CEL must judge): a phase's conditions run in
  // the phase's own (policy/phase-matcher.ts)
  const scope = new CodeScope();
  const code = typeof phase === "string" ? fastCode(parsed.expr, phase, scope) : undefined;
  let fast: FastEvaluation | undefined;
  const fastPath = code === undefined ? undefined : () => (fast ??= scope.make<FastEvaluation>("b", `return ${code};`));
  const run = plan(env, withStepCounter(expandMacros(parsed.expr)));
  const byCel = (scope: EvaluationTarget): CelResult => evaluating(scope, run, scope.variables as Parameters<typeof run>[0]);
  const evaluate = fastPath
    ? (scope: EvaluationTarget): CelResult => {
        if (scope instanceof Bindings) {
          const value = fastPath()(scope);
          if (value !== undefined) return value as CelResult;
        }
        return byCel(scope);
      }
    : byCel;
  return {
    text,
    type: t,
    cost: checked.cost,
    evaluate,
    evaluateByCel: byCel,
    get fast() {
      return fastPath?.();
    },
    tree: fastPath ? parsed.expr : undefined,
    reads: checked.reads,
  };
}

/** The parser's error, at its column (its messages say what it found and what it expected). */
function syntaxProblem(err: unknown): CompileProblem {
  const e = err as { message?: string; location?: { start?: { offset?: number } } };
  if (err instanceof RangeError) return { kind: "complexity", message: "the expression nests too deeply to parse", offset: 0 };
  const message = (e.message ?? String(err)).replace(/^<input>:\d+:\d+: /, "");
  return { kind: "syntax", message: `it does not parse: ${message}`, offset: e.location?.start?.offset ?? 0 };
}

/**
 * The offset where brackets (outside string literals) first nest past
 * `limit`, or undefined: checked before parsing, since the parser recurses
 * once per level and a few thousand levels would exhaust its stack.
 */
export function nestingPastLimit(text: string, limit: number): number | undefined {
  let depth = 0;
  let quote = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quote !== "") {
      if (c === "\\") i++;
      else if (text.startsWith(quote, i)) {
        i += quote.length - 1;
        quote = "";
      }
      continue;
    }
    if (c === "'" || c === '"') quote = text.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
    if (quote.length === 3) i += 2;
    else if (c === "(" || c === "[" || c === "{") {
      if (++depth > limit) return i;
    } else if (c === ")" || c === "]" || c === "}") depth--;
    else if (c === "!" || c === "-") {
      // a run of unary operators nests as brackets do
      let run = 1;
      while (text[i + run] === c) run++;
      if (run > limit) return i;
      i += run - 1;
    }
  }
  return undefined;
}

/** A copy of the tree whose macros' conditions spend a unit of the budget per loop step. */
function withStepCounter(root: Expr): Expr {
  let nextId = 0n;
  const visit = eachPart;
  visit(root, (e) => {
    if (e.id >= nextId) nextId = e.id + 1n;
  });
  visit(root, (e) => {
    if (e.exprKind.case !== "comprehensionExpr" || !e.exprKind.value.loopCondition) return;
    const c = e.exprKind.value;
    c.loopCondition = create(ExprSchema, { id: nextId++, exprKind: { case: "callExpr", value: { function: STEP, args: [c.loopCondition!] } } });
  });
  return root;
}

