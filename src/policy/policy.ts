/**
 * A loaded policy: its rules per phase, compiled, and the run of a phase
 * over one connection, request or response. Rules run in order; a rule
 * matches when every expression is true (one that fails to evaluate is not
 * true: the rule does not match, and the failure is told); a matching
 * rule's actions run in order, and the first that answers or closes ends
 * the run. The run spends from one budget (limits.ts costLimit): past it,
 * the run ends with a 500 (on_tcp_connect: the connection closed), never
 * with the rest of the rules skipped and the request let through.
 */
import { isCelError } from "@bufbuild/cel";
import type { CompiledAction } from "./actions/types.ts";
import type { PolicyResponse } from "./response.ts";
import type { CompiledExpression } from "./cel/compile.ts";
import { Budget } from "./cel/evaluation.ts";
import type { Coding } from "./compression.ts";
import { Bindings } from "./context.ts";
import type { PolicyInput } from "./facts.ts";
import { WorkingRequest, WorkingResponse } from "./message.ts";
import type { PolicyLimits } from "./limits.ts";
import type { Outcome, RuleTrace, RunProblem, Verdict } from "./outcome.ts";
import type { PolicyServices } from "./services.ts";
import type { Phase } from "./variables.ts";

export interface CompiledRule {
  /** The name, or `#N`. */
  label: string;
  expressions: CompiledExpression[];
  actions: CompiledAction[];
}

/** What a run starts from when it follows another layer's: the request as that layer left it, and who it let in. */
export interface RunState {
  request?: WorkingRequest;
  response?: WorkingResponse;
  identity?: string;
}

const FAILED: PolicyResponse = { status: 500, headers: [["content-type", "text/plain; charset=utf-8"]], body: "The tunnel's traffic policy could not be evaluated for this request.\n" };

export class Policy {
  constructor(
    /** Where it came from, for messages: a file name, a layer's name. */
    readonly source: string,
    private readonly rules: Readonly<Record<Phase, readonly CompiledRule[]>>,
    private readonly limits: PolicyLimits,
    readonly services: PolicyServices,
  ) {}

  /** Whether the phase has rules (none: the edge need not run it at all). */
  has(phase: Phase): boolean {
    return this.rules[phase].length > 0;
  }

  /** The number of rules in each phase. */
  get size(): Record<Phase, number> {
    return { on_tcp_connect: this.rules.on_tcp_connect.length, on_http_request: this.rules.on_http_request.length, on_http_response: this.rules.on_http_response.length };
  }

  /** Whether a request's body must be handed over (verify-webhook, jwt-validation from a body), up to MAX_BODY_BYTES. */
  get readsBody(): boolean {
    return this.rules.on_http_request.some((r) => r.actions.some((a) => a.readsBody));
  }

  /** Runs a phase on fresh facts. */
  run(phase: Phase, input: PolicyInput): Promise<Outcome> {
    const now = input.now ?? this.services.now();
    return this.runFrom(phase, { ...input, now }, {
      request: input.request ? new WorkingRequest(input.request, now) : undefined,
      response: input.response ? new WorkingResponse(input.response) : undefined,
      identity: input.identity,
    });
  }

  /** Runs a phase from where another layer left the request (PolicyChain). */
  async runFrom(phase: Phase, input: PolicyInput, state: RunState): Promise<Outcome> {
    const bindings = new Bindings({ ...input, identity: state.identity }, new Budget(this.limits.costLimit), state.request, state.response);
    const matched: RuleTrace[] = [];
    const problems: RunProblem[] = [];
    const logs: Record<string, string>[] = [];
    let compression: Coding | undefined;
    const done = (verdict: Verdict): Outcome => ({
      phase,
      source: this.source,
      matched,
      verdict,
      request: state.request,
      response: state.response,
      identity: bindings.identity,
      compression,
      logs,
      problems,
    });
    const overBudget = (rule: string, action: string): Outcome => {
      problems.push({ code: "COST_EXCEEDED", rule, message: `the run went past its cost limit of ${this.limits.costLimit}` });
      return done(phase === "on_tcp_connect" ? { kind: "close", rule, action } : { kind: "respond", response: FAILED, rule, action });
    };

    for (const rule of this.rules[phase]) {
      let matches = true;
      for (const e of rule.expressions) {
        const value = e.evaluate(bindings);
        if (bindings.budget.exceeded) return overBudget(rule.label, "(expression)");
        if (isCelError(value)) {
          problems.push({ code: "EVALUATION_ERROR", rule: rule.label, message: `${e.text}: ${value.message}` });
          matches = false;
          break;
        }
        if (value !== true) {
          matches = false;
          break;
        }
      }
      if (!matches) continue;
      const trace: RuleTrace = { rule: rule.label, actions: [] };
      matched.push(trace);
      for (const action of rule.actions) {
        const ctx = {
          phase,
          bindings,
          services: this.services,
          setVariables: (name: string, values: Record<string, unknown>) => {
            bindings.actionVars[name] = values;
            bindings.changed();
          },
          log: (fields: Record<string, string>) => void logs.push(fields),
          problem: (message: string) => void problems.push({ code: "EVALUATION_ERROR", rule: rule.label, message }),
          compress: (coding: Coding) => void (compression = coding),
        };
        let result;
        try {
          result = await action.run(ctx);
        } catch (err) {
          if (bindings.budget.exceeded) return overBudget(rule.label, action.type);
          trace.actions.push({ type: action.type, result: "failed", note: String(err) });
          problems.push({ code: "ACTION_FAILED", rule: rule.label, message: `${action.type}: ${(err as Error).message ?? String(err)}` });
          return done(phase === "on_tcp_connect" ? { kind: "close", rule: rule.label, action: action.type } : { kind: "respond", response: FAILED, rule: rule.label, action: action.type });
        }
        if (bindings.budget.exceeded) return overBudget(rule.label, action.type);
        if (result.kind === "continue") {
          trace.actions.push({ type: action.type, result: "continued", note: result.note });
          continue;
        }
        trace.actions.push({ type: action.type, result: result.kind === "respond" ? "responded" : "closed", note: result.note });
        return done(result.kind === "respond" ? { kind: "respond", response: result.response, rule: rule.label, action: action.type } : { kind: "close", rule: rule.label, action: action.type });
      }
    }
    return done({ kind: "continue" });
  }
}
