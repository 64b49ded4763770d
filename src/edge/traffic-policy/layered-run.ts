/**
 * One request's (or connection's) run through a tunnel's policy layers,
 * in steps the edge takes in its own order: the operator's layers, then
 * whatever the edge asks between (the tunnel's sign-in flags), then the
 * tunnel's own; for the response, the tunnel's own first and the
 * operator's last (policy/chain.ts's order, kept here across the steps).
 * The request as the actions leave it, who the visitor is and the coding
 * chosen carry from one layer to the next and on to the response.
 */
import type { Coding, Outcome, Policy, PolicyInput, PolicyResponse, RuleTrace, Verdict } from "../../policy/index.ts";
import { WorkingRequest, type WorkingResponse } from "../../policy/message.ts";
import type { RunState } from "../../policy/policy.ts";
import type { Phase } from "../../policy/variables.ts";
import { log } from "../../log.ts";
import { fieldName } from "../../protocol/policy-rules-field.ts";
import type { Refusal } from "../judgement/pipeline.ts";
import type { Tunnel } from "../registry.ts";

export class LayeredRun implements RunState {
  /** The request as the layers so far left it. */
  request: WorkingRequest | undefined;
  /** The response as the response's run left it. */
  response: WorkingResponse | undefined;
  /** Who an authentication let in. */
  identity: string | undefined;
  /** Each layer's run, in the order they ran: the inspector's and the log's matched rules. */
  readonly runs: Outcome[] = [];
  /** compress-response's choice, from the response's run. */
  compression: Coding | undefined;
  /** The tunnel's own policy's rules that matched the request, for its service and inspector (X-Burrow-Policy-Rules); undefined: none. */
  ownMatched: string | undefined;
  /** The tunnel whose agent is told of the request once its response is judged (passed-notes.ts), and on which of its streams; undefined: not told. */
  noteTunnel: Tunnel | undefined;
  noteStream = 0;
  /** Why the request's body could not be read for an action (http-request.ts readWhenAsked): the door's answer. */
  unreadBody: Refusal | undefined;
  /** The edge reads of a run only which rules matched (the inspector's notes, X-Burrow-Policy-Rules) and the log action's fields: no action's trace is kept (RunState.brief). */
  readonly brief = true;

  readonly facts: PolicyInput;

  constructor(facts: PolicyInput) {
    // one clock for every layer and phase of the run
    this.facts = facts.now === undefined ? { ...facts, now: Date.now() } : facts;
    this.request = facts.request ? new WorkingRequest(facts.request, this.facts.now!) : undefined;
    this.identity = facts.identity;
  }

  /** The run as a request's pass through the policies (http-request.ts PolicyPass): the run itself, no object more a request. */
  get run(): LayeredRun {
    return this;
  }

  /** What each layer's run starts from and leaves (the run itself). */
  get state(): RunState {
    return this;
  }


  /**
   * Runs `phase` through `layers` in order from where the run is; the
   * first verdict that is not `continue` ends it. At once while no action
   * waits: a promise only from the first that does.
   */
  through(phase: Phase, layers: readonly Policy[], from = 0): Verdict | Promise<Verdict> {
    for (let i = from; i < layers.length; i++) {
      const layer = layers[i]!;
      if (!layer.has(phase)) continue;
      const out = layer.runFrom(phase, this.facts, this.state);
      if (out instanceof Promise) {
        const next = i + 1;
        return out.then((o) => this.ran(phase, o) ?? this.through(phase, layers, next));
      }
      const verdict = this.ran(phase, out);
      if (verdict) return verdict;
    }
    return CONTINUE;
  }

  /** A layer's run taken in: its verdict when it ends the run. */
  private ran(phase: Phase, out: Outcome): Verdict | undefined {
    this.runs.push(out);
    // the log action's fields, into the server's structured log (the redaction net applies as to any line)
    if (out.logs.length > 0) for (const fields of out.logs) log.info("traffic policy log", { ...fields, policy: out.source, phase, tunnel: this.facts.tunnel.name });
    this.identity ??= out.identity;
    if (phase === "on_http_response") this.compression ??= out.compression;
    return out.verdict.kind !== "continue" ? out.verdict : undefined;
  }

  /**
   * The response phase: the response's head given (its fields read when a
   * rule needs them), the layers in response order; then, when it goes on,
   * on_event_stream_message in the same order, judged on the same head: its
   * sse-find-replace rules are applied to each event as the body streams
   * (event-stream.ts).
   */
  respond(response: WorkingResponse, layers: readonly Policy[]): Verdict | Promise<Verdict> {
    this.response = response;
    const verdict = this.through("on_http_response", layers);
    if (!layers.some((p) => p.has("on_event_stream_message"))) return verdict;
    const events = (v: Verdict) => (v.kind !== "continue" ? v : this.through("on_event_stream_message", layers));
    return verdict instanceof Promise ? verdict.then(events) : events(verdict);
  }

}

const CONTINUE: Verdict = { kind: "continue" };

/** The field the request the agent gets names the tunnel's own rules that matched it in (edge-set: a visitor's is dropped, as every X-Burrow-*). */
export const POLICY_RULES_FIELD = "X-Burrow-Policy-Rules";
/** Names listed at most in the field (each as protocol/policy-rules-field.ts spells it). */
const MAX_NAMES = 20;

/** Rule names made printable, by name: a rule matches request after request. Bounded: past the cap it starts again. */
const printable = new Map<string, string>();
const PRINTABLE_KEPT = 4096;

/** The last rules matched (a brief run's traces are the same objects run after run) and their field's value: most requests match the same rules as the one before. */
let lastMatched: readonly RuleTrace[] = [];
let lastNames: string | undefined;

/** The rules of a run that matched, as the field's value: names made printable, commas taken out. */
export function matchedNames(out: Outcome): string | undefined {
  const matched = out.matched;
  if (matched.length === 0) return undefined;
  if (sameTraces(matched, lastMatched)) return lastNames;
  lastNames = namesOf(matched);
  lastMatched = matched.slice();
  return lastNames;
}

function sameTraces(a: readonly RuleTrace[], b: readonly RuleTrace[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function namesOf(matched: readonly RuleTrace[]): string {
  let text = "";
  for (let i = 0; i < matched.length && i < MAX_NAMES; i++) {
    const rule = matched[i]!.rule;
    let name = printable.get(rule);
    if (name === undefined) {
      name = fieldName(rule);
      if (printable.size >= PRINTABLE_KEPT) printable.clear();
      printable.set(rule, name);
    }
    text = i === 0 ? name : `${text}, ${name}`;
  }
  return text;
}

/** A policy's answer as a Response, for a door that answers with one (a refusal's page). */
export function policyAnswer(r: PolicyResponse): Response {
  const headers = new Headers();
  for (const [name, value] of r.headers) headers.append(name, value);
  return new Response(r.status === 204 || r.status === 304 ? null : r.body, { status: r.status, headers });
}
