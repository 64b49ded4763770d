/**
 * One request's (or connection's) run through a tunnel's policy layers,
 * in steps the edge takes in its own order: the operator's layers, then
 * whatever the edge asks between (the tunnel's sign-in flags), then the
 * tunnel's own; for the response, the tunnel's own first and the
 * operator's last (policy/chain.ts's order, kept here across the steps).
 * The request as the actions leave it, who the visitor is and the coding
 * chosen carry from one layer to the next and on to the response.
 */
import type { Coding, Outcome, Policy, PolicyInput, PolicyResponse, Verdict } from "../../policy/index.ts";
import { WorkingRequest, WorkingResponse } from "../../policy/message.ts";
import type { RunState } from "../../policy/policy.ts";
import type { Phase } from "../../policy/variables.ts";
import { log } from "../../log.ts";

export class LayeredRun {
  readonly state: RunState;
  /** Each layer's run, in the order they ran: the inspector's and the log's matched rules. */
  readonly runs: Outcome[] = [];
  /** compress-response's choice, from the response's run. */
  compression: Coding | undefined;
  /** The tunnel's own policy's rules that matched the request, for its service and inspector (X-Burrow-Policy-Rules); undefined: none. */
  ownMatched: string | undefined;

  readonly facts: PolicyInput;

  constructor(facts: PolicyInput) {
    // one clock for every layer and phase of the run
    this.facts = facts.now === undefined ? { ...facts, now: Date.now() } : facts;
    this.state = {
      request: facts.request ? new WorkingRequest(facts.request, this.facts.now!) : undefined,
      identity: facts.identity,
    };
  }

  /** The request as the layers so far left it. */
  get request(): WorkingRequest | undefined {
    return this.state.request;
  }

  /** Runs `phase` through `layers` in order from where the run is; the first verdict that is not `continue` ends it. */
  async through(phase: Phase, layers: readonly Policy[]): Promise<Verdict> {
    for (const layer of layers) {
      if (!layer.has(phase)) continue;
      const out = await layer.runFrom(phase, this.facts, this.state);
      this.runs.push(out);
      // the log action's fields, into the server's structured log (the redaction net applies as to any line)
      for (const fields of out.logs) log.info("traffic policy log", { ...fields, policy: out.source, phase, tunnel: this.facts.tunnel.name });
      this.state.identity ??= out.identity;
      if (phase === "on_http_response") this.compression ??= out.compression;
      if (out.verdict.kind !== "continue") return out.verdict;
    }
    return CONTINUE;
  }

  /** The response phase: the response's head given, the layers in response order. */
  respond(response: { status: number; headers: [string, string][] }, layers: readonly Policy[]): Promise<Verdict> {
    this.state.response = new WorkingResponse(response);
    return this.through("on_http_response", layers);
  }

  /** The response as the response's run left it. */
  get response(): WorkingResponse | undefined {
    return this.state.response;
  }
}

const CONTINUE: Verdict = { kind: "continue" };

/** The field the request the agent gets names the tunnel's own rules that matched it in (edge-set: a visitor's is dropped, as every X-Burrow-*). */
export const POLICY_RULES_FIELD = "X-Burrow-Policy-Rules";
/** Names listed at most, and their length, in the field. */
const MAX_NAMES = 20;
const MAX_NAME = 100;

/** The rules of a run that matched, as the field's value: names made printable, commas taken out. */
export function matchedNames(out: Outcome): string | undefined {
  if (out.matched.length === 0) return undefined;
  return out.matched
    .slice(0, MAX_NAMES)
    .map((m) => m.rule.slice(0, MAX_NAME).replace(/[^\x20-\x7e]|,/g, "?").trim())
    .join(", ");
}

/** A policy's answer as a Response, for a door that answers with one (a refusal's page). */
export function policyAnswer(r: PolicyResponse): Response {
  const headers = new Headers();
  for (const [name, value] of r.headers) headers.append(name, value);
  return new Response(r.status === 204 || r.status === 304 ? null : r.body, { status: r.status, headers });
}
