/**
 * A loaded policy: its rules per phase, compiled, and the run of a phase
 * over one connection, request or response. Rules run in order; a rule
 * matches when every expression is true (one that fails to evaluate is not
 * true: the rule does not match, and the failure is told); a matching
 * rule's actions run in order, and the first that answers or closes ends
 * the run. The run spends from one budget (limits.ts costLimit): past it,
 * the run ends with a 500 (on_tcp_connect: the connection closed), never
 * with the rest of the rules skipped and the request let through.
 *
 * A run is synchronous for as long as its actions are (most are: a deny,
 * a header added, a rate limit counted in this process): it waits only
 * where an action must (a JWKS fetched, an OpenID sign-in), and then goes
 * on from that action. So a request the edge judges costs no promise when
 * no action of its run waits.
 */
import { isCelError } from "@bufbuild/cel";
import type { ActionContext, ActionResult, CompiledAction } from "./actions/types.ts";
import type { PolicyResponse } from "./response.ts";
import type { CompiledExpression } from "./cel/compile.ts";
import type { Coding } from "./compression.ts";
import { Bindings } from "./context.ts";
import type { PolicyInput } from "./facts.ts";
import type { GeoLookup } from "./geo.ts";
import { WorkingRequest, WorkingResponse } from "./message.ts";
import type { PolicyLimits } from "./limits.ts";
import { phaseMatcher, type PhaseMatcher } from "./phase-matcher.ts";
import { BODY_UNREAD, type LogValue, type Outcome, type RuleTrace, type RunProblem, type Verdict } from "./outcome.ts";
import type { PolicyServices } from "./services.ts";
import type { Phase } from "./variables.ts";

export interface CompiledRule {
  /** The name, or `#N`. */
  label: string;
  expressions: CompiledExpression[];
  actions: CompiledAction[];
  /** Its trace in a brief run (RunState.brief): the same for every run, made once. */
  briefTrace?: RuleTrace;
}

/** What a run starts from when it follows another layer's: the request as that layer left it, and who it let in. */
export interface RunState {
  request?: WorkingRequest;
  response?: WorkingResponse;
  identity?: string;
  /**
   * Nothing reads what the actions did (the edge reads only which rules
   * matched, for the inspector's notes and X-Burrow-Policy-Rules): the
   * run's trace names each rule that matched, in one object made once per
   * rule, and keeps no action's entry or note.
   */
  brief?: boolean;
}

/** What a policy knows of its rules once they are compiled, to do no more per run than they need. */
export interface PolicyTraits {
  /** Some expression reads `actions` (an action's results): without one, the actions' results are not kept. */
  readsActionVariables: boolean;
}

const FAILED: PolicyResponse = { status: 500, headers: [["content-type", "text/plain; charset=utf-8"]], body: "The tunnel's traffic policy could not be evaluated for this request.\n" };
const CONTINUE: Verdict = { kind: "continue" };
/** A run's lists when it has nothing to say in them (never written to: a run with something to say makes its own). */
const NONE: never[] = Object.freeze([]) as never[];

export class Policy {
  /** Whether the request phase has an action that reads the body. */
  readonly readsBody: boolean;
  private readonly counts: Record<Phase, number>;
  /** Each phase's conditions as one function (phase-matcher.ts), written when the phase first runs. */
  private readonly matchers: Partial<Record<Phase, PhaseMatcher>> = {};

  constructor(
    /** Where it came from, for messages: a file name, a layer's name. */
    readonly source: string,
    private readonly rules: Readonly<Record<Phase, readonly CompiledRule[]>>,
    private readonly limits: PolicyLimits,
    readonly services: PolicyServices,
    readonly traits: PolicyTraits = { readsActionVariables: true },
  ) {
    this.counts = { on_tcp_connect: rules.on_tcp_connect.length, on_http_request: rules.on_http_request.length, on_http_response: rules.on_http_response.length, on_event_stream_message: rules.on_event_stream_message.length };
    this.readsBody = rules.on_http_request.some((r) => r.actions.some((a) => a.readsBody));
  }

  /** Whether the phase has rules (none: the edge need not run it at all). */
  has(phase: Phase): boolean {
    return this.counts[phase] > 0;
  }

  /** The number of rules in each phase. */
  get size(): Record<Phase, number> {
    return { ...this.counts };
  }

  /** The rules of a phase, compiled (for a policy made of others' rules: combined.ts). */
  rulesOf(phase: Phase): readonly CompiledRule[] {
    return this.rules[phase];
  }

  /** The caps it was loaded under. */
  get caps(): PolicyLimits {
    return this.limits;
  }

  /** A phase's conditions as one function. */
  matcherOf(phase: Phase): PhaseMatcher {
    return (this.matchers[phase] ??= phaseMatcher(this.rules[phase], phase));
  }

  /** Runs a phase on fresh facts. */
  run(phase: Phase, input: PolicyInput): Promise<Outcome> {
    const now = input.now ?? this.services.now();
    return Promise.resolve(
      this.runFrom(phase, { ...input, now }, {
        request: input.request ? new WorkingRequest(input.request, now) : undefined,
        response: input.response ? new WorkingResponse(input.response) : undefined,
        identity: input.identity,
      }),
    );
  }

  /** Runs a phase from where another layer left the request (PolicyChain, the edge's LayeredRun): at once when no action waits. */
  runFrom(phase: Phase, input: PolicyInput, state: RunState): Outcome | Promise<Outcome> {
    return new PhaseRun(this, phase, this.rules[phase], this.matcherOf(phase), input, state).from(0, 0, undefined);
  }
}

/**
 * One run of one phase of one policy: its variables (it is its Bindings),
 * its state, and what its actions are given (it is their ActionContext):
 * one object a run.
 */
class PhaseRun extends Bindings implements ActionContext, Outcome {
  readonly services: PolicyServices;
  matched: RuleTrace[] = NONE;
  problems: RunProblem[] = NONE;
  logs: Record<string, LogValue>[] = NONE;
  compression: Coding | undefined;
  /** Once the run is done (a brief run is its own Outcome: done()). */
  verdict: Verdict = CONTINUE;
  /** RunState.brief: the trace keeps no action's entry. */
  private readonly brief: boolean;
  /** The rule whose actions are running, for the problems they tell. */
  private rule = "";

  constructor(
    private readonly policy: Policy,
    readonly phase: Phase,
    private readonly rules: readonly CompiledRule[],
    private readonly next: PhaseMatcher,
    input: PolicyInput,
    private readonly state: RunState,
  ) {
    super(input, policy.caps, state.request, state.response, state.identity);
    this.services = policy.services;
    this.brief = state.brief === true;
  }

  /** Bindings': conn.geo.* are answered by the services' GeoIP lookup. */
  protected override get geoLookup(): GeoLookup | undefined {
    return this.services.geo;
  }

  /** Outcome's: the policy's source. */
  get source(): string {
    return this.policy.source;
  }

  /** Whether the actions' notes are kept (ActionContext.traced): not in a brief run. */
  get traced(): boolean {
    return !this.brief;
  }

  get bindings(): Bindings {
    return this;
  }

  // ActionContext

  get keepsVariables(): boolean {
    return this.policy.traits.readsActionVariables;
  }

  setVariables(name: string, values: Record<string, unknown>): void {
    if (!this.policy.traits.readsActionVariables) return;
    this.actionVars[name] = values;
    this.variablesChanged();
  }

  log(fields: Record<string, LogValue>): void {
    if (this.logs === NONE) this.logs = [];
    this.logs.push(fields);
  }

  problem(message: string): void {
    this.told({ code: "EVALUATION_ERROR", rule: this.rule, message });
  }

  compress(coding: Coding): void {
    this.compression = coding;
  }

  private told(p: RunProblem): void {
    if (this.problems === NONE) this.problems = [];
    this.problems.push(p);
  }

  /**
   * The run from rule `r`, action `a` on: `trace` is that rule's when its
   * actions had begun (the run waited on one), undefined to judge rule `r`
   * first.
   */
  from(r: number, a: number, trace: RuleTrace | undefined): Outcome | Promise<Outcome> {
    const { rules } = this;
    const bindings: Bindings = this;
    // the request's body is read for the first action that needs it, when the edge reads it (WorkingRequest.readBody)
    const bodyFirst = this.policy.readsBody && this.request?.bodyReader !== undefined;
    for (; r < rules.length; r++, a = 0, trace = undefined) {
      if (trace === undefined) {
        // the next rule that matches, as the phase's conditions tell; one they hand back is judged here
        const m = this.next(bindings, r);
        if (m >= 0) {
          if (m >= rules.length) break;
          r = m;
        } else {
          r = -1 - m;
          const rule = rules[r]!;
          if (!this.matches(rule)) {
            if (bindings.budget.exceeded) return this.overBudget(rule.label, "(expression)");
            continue;
          }
        }
        const rule = rules[r]!;
        trace = this.brief ? (rule.briefTrace ??= Object.freeze({ rule: rule.label, actions: NONE, types: Object.freeze(rule.actions.map((x) => x.type)) })) : { rule: rule.label, actions: [] };
        if (this.matched === NONE) this.matched = [];
        this.matched.push(trace);
      }
      const rule = rules[r]!;
      this.rule = rule.label;
      const actions = rule.actions;
      for (; a < actions.length; a++) {
        const action = actions[a]!;
        if (bodyFirst && action.readsBody) {
          const read = this.request!.readBody();
          // a wait as an action's: the run goes on from this action once the body is in
          if (read) return this.afterBody(read, r, a, trace, rule, action);
        }
        let result: ActionResult | Promise<ActionResult>;
        try {
          result = action.run(this);
        } catch (err) {
          return this.failed(err, rule, action, trace);
        }
        if (result instanceof Promise) {
          const at = r;
          const next = a + 1;
          const waited = trace;
          return result.then(
            (res) => this.settle(res, rule, action, waited) ?? this.from(at, next, waited),
            (err) => this.failed(err, rule, action, waited),
          );
        }
        const end = this.settle(result, rule, action, trace);
        if (end) return end;
      }
    }
    return this.done(CONTINUE);
  }

  /** The run from action `a` of rule `r` once the body is read; the body not read (the edge answers why), its end. */
  private afterBody(read: Promise<boolean>, r: number, a: number, trace: RuleTrace, rule: CompiledRule, action: CompiledAction): Promise<Outcome> {
    return read.then(
      (ok) => {
        if (ok) return this.from(r, a, trace);
        if (!this.brief) trace.actions.push({ type: action.type, result: "closed", note: "the request's body could not be read" });
        return this.done({ kind: "close", rule: rule.label, action: action.type, code: BODY_UNREAD });
      },
      (err) => this.failed(err, rule, action, trace),
    );
  }

  /** Whether every expression of the rule is true (one that fails is told, and the rule does not match). */
  private matches(rule: CompiledRule): boolean {
    const bindings: Bindings = this;
    for (const e of rule.expressions) {
      // the run is a Bindings: its fast path is asked directly (evaluate asks it after checking that), CEL when it has no answer
      const fast = e.fast;
      let value = fast !== undefined ? fast(bindings) : undefined;
      if (value === undefined) value = e.evaluate(bindings);
      if (bindings.budget.exceeded) return false;
      if (value === true) continue;
      if (value === false) return false;
      if (isCelError(value)) this.told({ code: "EVALUATION_ERROR", rule: rule.label, message: `${e.text}: ${value.message}` });
      return false;
    }
    return true;
  }

  /** An action's result: the run's end (answered, closed, over budget), or undefined to go on. */
  private settle(result: ActionResult, rule: CompiledRule, action: CompiledAction, trace: RuleTrace): Outcome | undefined {
    if (this.exceeded) return this.overBudget(rule.label, action.type);
    if (result.kind === "continue") {
      if (!this.brief) trace.actions.push({ type: action.type, result: "continued", note: result.note });
      return undefined;
    }
    if (!this.brief) trace.actions.push({ type: action.type, result: result.kind === "respond" ? "responded" : "closed", note: result.note });
    const code = result.code;
    if (result.kind === "respond") return this.done(code === undefined ? { kind: "respond", response: result.response, rule: rule.label, action: action.type } : { kind: "respond", response: result.response, rule: rule.label, action: action.type, code });
    return this.done(code === undefined ? { kind: "close", rule: rule.label, action: action.type } : { kind: "close", rule: rule.label, action: action.type, code });
  }

  /** An action threw: the run ends with a 500 (a closed connection), never with the request let through. */
  private failed(err: unknown, rule: CompiledRule, action: CompiledAction, trace: RuleTrace): Outcome {
    if (this.exceeded) return this.overBudget(rule.label, action.type);
    if (!this.brief) trace.actions.push({ type: action.type, result: "failed", note: String(err) });
    this.told({ code: "ACTION_FAILED", rule: rule.label, message: `${action.type}: ${(err as Error).message ?? String(err)}` });
    return this.done(this.phase === "on_tcp_connect" ? { kind: "close", rule: rule.label, action: action.type } : { kind: "respond", response: FAILED, rule: rule.label, action: action.type });
  }

  private overBudget(rule: string, action: string): Outcome {
    this.told({ code: "COST_EXCEEDED", rule, message: `the run went past its cost limit of ${this.policy.caps.costLimit}` });
    return this.done(this.phase === "on_tcp_connect" ? { kind: "close", rule, action } : { kind: "respond", response: FAILED, rule, action });
  }

  private done(verdict: Verdict): Outcome {
    // a brief run (the edge's, a request after request) is its own outcome: one object less a run
    if (this.brief) {
      this.verdict = verdict;
      return this;
    }
    const { state } = this;
    return {
      phase: this.phase,
      source: this.policy.source,
      matched: this.matched,
      verdict,
      request: state.request,
      response: state.response,
      identity: this.identity,
      compression: this.compression,
      logs: this.logs,
      problems: this.problems,
    };
  }
}
