/**
 * What a run of a policy says: which rules matched and what each of their
 * actions did (for `burrow policy test` and the inspector), the verdict
 * (the request goes on, is answered, or its connection is closed), the
 * request and response as the actions left them, who the visitor is after
 * an authentication action, the coding the response is to be compressed
 * with, the log action's entries, and what failed to evaluate.
 */
import type { PolicyResponse } from "./response.ts";
import type { Coding } from "./compression.ts";
import type { WorkingRequest, WorkingResponse } from "./message.ts";
import type { Phase } from "./variables.ts";

export interface ActionTrace {
  type: string;
  result: "continued" | "responded" | "closed" | "failed";
  note?: string;
}

export interface RuleTrace {
  /** The rule's name, or `#N` (1-based in its phase). */
  rule: string;
  actions: ActionTrace[];
  /** In a brief run (RunState.brief), where no action's entry is kept: the rule's actions' types, for what shows which rules matched (the inspector's notes). */
  types?: readonly string[];
}

export interface RunProblem {
  /** EVALUATION_ERROR: an expression or an interpolation failed (a rule whose expression fails does not match); COST_EXCEEDED: the run went past its cost limit and was answered 500 (closed, on_tcp_connect); ACTION_FAILED: an action threw, answered the same way. */
  code: "EVALUATION_ERROR" | "COST_EXCEEDED" | "ACTION_FAILED";
  rule: string;
  message: string;
}

/**
 * `code`: what the action that ended the run says the refusal is, when it
 * says: the tunnel's flags' rules refuse as they always did, and the edge
 * reports them so (ADDRESS_REFUSED, SIGN_IN); a rate limit's refusal
 * (RATE_LIMITED) is reported as any policy's (POLICY) and told besides
 * (the policy.rate_limited event); BODY_UNREAD (a `close`): the edge could
 * not read the request's body for an action that needs it, and answers
 * with why. No code: the edge's POLICY.
 */
export type Verdict =
  | { kind: "continue" }
  | { kind: "respond"; response: PolicyResponse; rule: string; action: string; code?: string }
  | { kind: "close"; rule: string; action: string; code?: string };

/** A log action's field: any JSON value, as the policy wrote it (a number, a bool, null, a map or a list stays one), its strings interpolated text. */
export type LogValue = string | number | boolean | null | readonly LogValue[] | { readonly [name: string]: LogValue };

export interface Outcome {
  phase: Phase;
  /** The policy's source (its file, or the layer's name). */
  source: string;
  matched: RuleTrace[];
  verdict: Verdict;
  /** The request as the actions left it (headers added and removed, URL rewritten): what is forwarded. */
  request?: WorkingRequest;
  /** on_http_response: the response head as the actions left it. */
  response?: WorkingResponse;
  /** Who an authentication action let in (`visitor.identity`). */
  identity?: string;
  /** compress-response's choice: the body is to be streamed through compression.ts's compressor. */
  compression?: Coding;
  logs: Record<string, LogValue>[];
  problems: RunProblem[];
}

/** Verdict's code when the request's body could not be read for an action that reads it (WorkingRequest.readBody). */
export const BODY_UNREAD = "BODY_UNREAD";
