/**
 * http-request's `retry_condition`, as ngrok has it: a CEL expression
 * evaluated after an attempt; true makes another, up to ngrok's 3
 * retries, within the action's one timeout (it covers every attempt), and
 * each attempt counts against the run's cap of requests
 * (--policy-http-request-max-per-run). No wait between attempts: ngrok
 * documents none.
 *
 * The condition reads the attempts, not the visitor's request: its
 * variables are its own CEL environment (ngrok's names: `attempts`,
 * `last_attempt.req`, `last_attempt.res`, `last_attempt.error`), checked
 * at load as a phase's are; a field of `last_attempt.res` it does not
 * have is refused there. It spends the run's evaluation budget, as a
 * rule's expression does.
 */
import { CelScalar, isCelError, listType, mapType, type CelType } from "@bufbuild/cel";
import type { CompiledExpression, EvaluationTarget, OwnVariables } from "../cel/compile.ts";
import type { Bindings } from "../context.ts";

/** ngrok's: "the request is retried (up to 3 times)", so 4 attempts at most. */
export const MAX_RETRIES = 3;

const { STRING, INT } = CelScalar;
const HEADERS = mapType(STRING, listType(STRING));
const RECORD = mapType(STRING, CelScalar.DYN);

/** The retry condition's variables, their types and what they are (docs/policy.md). */
export const RETRY_VARIABLES: Readonly<Record<string, { type: CelType; about: string }>> = {
  attempts: { type: INT, about: "the attempts made so far, this one included (1 after the first)" },
  "last_attempt.req": { type: RECORD, about: "the request the last attempt sent: `method`, `url`, `header`, `body`" },
  "last_attempt.req.method": { type: STRING, about: "its method" },
  "last_attempt.req.url": { type: STRING, about: "its URL, query parameters included" },
  "last_attempt.req.header": { type: HEADERS, about: "its headers: lower-case name to values" },
  "last_attempt.req.body": { type: STRING, about: "its body (empty without one)" },
  "last_attempt.res": { type: RECORD, about: "the answer the last attempt got, if it got one (`has(last_attempt.res.status_code)`): `status_code`, `header`, `body`, `resolved_ip`, `time_ms`" },
  "last_attempt.res.status_code": { type: INT, about: "its status" },
  "last_attempt.res.header": { type: HEADERS, about: "its headers: lower-case name to values" },
  "last_attempt.res.body": { type: STRING, about: "its body, as read (up to --policy-http-request-max-bytes)" },
  "last_attempt.res.resolved_ip": { type: STRING, about: "the address it came from" },
  "last_attempt.res.time_ms": { type: INT, about: "how long the attempt took, in ms" },
  "last_attempt.error": { type: STRING, about: "why the last attempt got no answer, as `CODE: message` (`HTTP_REQUEST_TIMEOUT: ...`); empty when it got one" },
};

export const RETRY_CONDITION: OwnVariables = {
  name: "an http-request's retry_condition",
  variables: Object.fromEntries(Object.entries(RETRY_VARIABLES).map(([name, v]) => [name, v.type])),
};

/** What an attempt came to, as the condition reads it. */
export interface AttemptFacts {
  /** Attempts made so far, this one included. */
  attempts: number;
  req: { method: string; url: string; header: Map<string, string[]>; body: string };
  /** The answer, as `actions.ngrok.http_request.res` has it; none when the attempt failed. */
  res?: Record<string, unknown>;
  /** `CODE: message` when the attempt failed. */
  error?: string;
}

/**
 * Whether the condition asks for another attempt. One that fails to
 * evaluate (it read `last_attempt.res.status_code` of an attempt that got
 * no answer) asks for none, and says why; so does one that spent the
 * run's budget (the run then ends: policy.ts).
 */
export function retryWanted(condition: CompiledExpression, facts: AttemptFacts, bindings: Bindings): { retry: boolean; problem?: string } {
  const target: EvaluationTarget = {
    variables: {
      attempts: BigInt(facts.attempts),
      "last_attempt.req": facts.req,
      "last_attempt.res": facts.res ?? {},
      "last_attempt.error": facts.error ?? "",
    },
    budget: bindings.budget,
    caps: bindings.caps,
    header: (of, name) => bindings.header(of, name),
    queryParam: (name) => bindings.queryParam(name),
    cookie: (name) => bindings.cookie(name),
  };
  const value = condition.evaluate(target);
  if (bindings.budget.exceeded) return { retry: false };
  if (value === true || value === false) return { retry: value };
  if (isCelError(value)) return { retry: false, problem: `retry_condition: ${value.message}` };
  return { retry: false, problem: "retry_condition: not a bool" };
}
