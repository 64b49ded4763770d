/**
 * What an expression's functions reach while it is evaluated: the cost
 * spent so far in this run of a policy, and the request or response the
 * `getReqHeader`-style functions read. CEL functions are registered once
 * for every policy; evaluation is synchronous, so the one in progress is
 * held here for them, set around each evaluation and put back after.
 */
import { DEFAULT_POLICY_LIMITS, type PolicyLimits } from "../limits.ts";

/** The caps the functions hold to as they run (limits.ts): the running policy's, the server's flags. */
export type RunCaps = Pick<PolicyLimits, "maxValueBytes" | "maxMadeEntries" | "maxJsonDepth">;

/** The cost a run of a policy's phase may still spend (limits.ts, costLimit). */
export class Budget {
  /** Set once the run went past its limit: the run ends, whatever the expression returned. */
  exceeded = false;
  constructor(public remaining: number) {}
}

/** Thrown (and turned into a CEL error by the library) when a run spends past its budget. */
export class CostExceeded extends Error {
  override name = "CostExceeded";
  constructor() {
    super("the policy spent more than its evaluation cost limit on this request");
  }
}

/** What the functions read of the message at hand. */
export interface EvaluationScope {
  readonly budget: Budget;
  /** The caps of the policy that runs (a field of the run: nothing is made for it). */
  readonly caps: RunCaps;
  /** A header's values (name in any case), or undefined when absent; `res` in on_http_response only. */
  header(of: "req" | "res", name: string): readonly string[] | undefined;
  /** A query parameter's values, or undefined when absent. */
  queryParam(name: string): readonly string[] | undefined;
  /** The first cookie of that name on the request. */
  cookie(name: string): { name: string; value: string } | undefined;
}

let current: EvaluationScope | undefined;

/** Runs `evaluate(arg)` with `scope` as the one functions reach. */
export function evaluating<A, T>(scope: EvaluationScope, evaluate: (arg: A) => T, arg: A): T {
  const before = current;
  current = scope;
  try {
    return evaluate(arg);
  } finally {
    current = before;
  }
}

/** The scope of the evaluation in progress; an expression evaluated outside one (at load, in a test) has none. */
export function scope(): EvaluationScope | undefined {
  return current;
}

/** The caps of the run in progress; outside one (at load, in a test), the defaults. */
export function caps(): RunCaps {
  return current?.caps ?? DEFAULT_POLICY_LIMITS;
}

/** Spends `units` of the run's budget; throws CostExceeded past it (the run is over, see Budget.exceeded). */
export function charge(units: number): void {
  const budget = current?.budget;
  if (!budget) return;
  budget.remaining -= units;
  if (budget.remaining < 0) {
    budget.exceeded = true;
    throw new CostExceeded();
  }
}
