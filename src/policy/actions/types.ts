/**
 * What an action is to the engine: its type name (ngrok's), the phases it
 * runs in, the schema of its config (valibot, ngrok's field names), and a
 * compile step that turns a checked config into something that runs: its
 * CEL compiled, its secrets digested, its state (a throttle, a JWKS cache)
 * made once. Running it is a function of the run's state and the services
 * the edge gives; it answers whether the request goes on, is answered, or
 * (on_tcp_connect) its connection is closed. No action touches a socket.
 */
import type * as v from "valibot";
import type { CompiledExpression, OwnVariables } from "../cel/compile.ts";
import type { Template } from "../cel/template.ts";
import type { Bindings } from "../context.ts";
import type { Coding } from "../compression.ts";
import type { PathKey } from "../document.ts";
import type { PolicyLimits } from "../limits.ts";
import type { Phase } from "../variables.ts";
import type { PolicyServices } from "../services.ts";

import type { PolicyResponse } from "../response.ts";
import type { LogValue } from "../outcome.ts";

export type { PolicyResponse };

export type ActionResult =
  /** The run goes on to the next action. `note`: what it did, for the trace. */
  | { kind: "continue"; note?: string }
  /** The request is answered with `response`; nothing after runs. `code`: Verdict's. */
  | { kind: "respond"; response: PolicyResponse; note?: string; code?: string }
  /** on_tcp_connect: the connection is closed; nothing after runs. */
  | { kind: "close"; note?: string; code?: string };

/** What a running action is given. */
export interface ActionContext {
  readonly phase: Phase;
  readonly bindings: Bindings;
  readonly services: PolicyServices;
  /** Sets the action's result variables: `actions.ngrok.<name>.*`. */
  setVariables(name: string, values: Record<string, unknown>): void;
  /** Whether the policy reads the actions' results at all: without, an action need not make them (setVariables drops them). */
  readonly keepsVariables: boolean;
  /** Whether the run's trace keeps what each action did (policy.ts RunState.brief): without, an action that goes on need not write its note. */
  readonly traced: boolean;
  /** A log entry for the inspector and the server's log (the log action). */
  log(fields: Record<string, LogValue>): void;
  /** An evaluation error that did not stop the action (an interpolation that failed, say). */
  problem(message: string): void;
  /** compress-response chose a coding: the edge streams the body through compression.ts's compressor. */
  compress(coding: Coding): void;
}

export interface CompiledAction {
  readonly type: string;
  /** Whether it reads the request's body (the edge must then hand it over, up to MAX_BODY_BYTES). */
  readonly readsBody?: boolean;
  /**
   * add-headers whose every value is a constant the edge may write: the
   * fields it always appends, in order, whatever the request (nothing to
   * evaluate, nothing that can fail), so a run of such actions alone can be
   * known at load (edge/traffic-policy/tunnel-policy.ts).
   */
  readonly constantFields?: readonly (readonly [string, string])[];
  run(ctx: ActionContext): ActionResult | Promise<ActionResult>;
}

/** What compiling a config may use: CEL against the phase's variables, reported at the config's own paths. */
export interface CompileTools {
  readonly phase: Phase;
  readonly limits: PolicyLimits;
  /** A stable name for this action's state across reloads of the same policy (rate-limit buckets). */
  readonly key: string;
  /** CEL against the phase's variables, or `own`: variables the action gives it (http-request's retry_condition). */
  expression(text: string, at: readonly PathKey[], purpose: "condition" | "value", own?: OwnVariables): CompiledExpression | undefined;
  template(text: string, at: readonly PathKey[]): Template | undefined;
  /** A mistake in the config at `at` (relative to `config`); the action is refused. */
  error(at: readonly PathKey[], message: string): void;
}

export interface ActionDefinition<Config = unknown> {
  /** ngrok's name, e.g. `rate-limit`. */
  readonly type: string;
  readonly phases: readonly Phase[];
  /** The config's schema; a missing config is checked as `{}`. */
  readonly schema: v.GenericSchema<unknown, Config>;
  /** Undefined when `tools.error` was called. */
  compile(config: Config, tools: CompileTools): CompiledAction | undefined;
}

/** A definition, typed for the registry. */
export function defineAction<Config>(def: ActionDefinition<Config>): ActionDefinition<unknown> {
  return def as unknown as ActionDefinition<unknown>;
}

/** A plain response: status, headers, text. */
export function textResponse(status: number, body: string, headers: [string, string][] = []): PolicyResponse {
  const has = headers.some(([n]) => n.toLowerCase() === "content-type");
  return { status, headers: has ? headers : [...headers, ["content-type", "text/plain; charset=utf-8"]], body };
}
