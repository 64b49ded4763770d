/**
 * Policies in layers: the operator's (server-wide, a user's, a hostname's)
 * and the tunnel's own. For a connection and a request the layers run in
 * order, the operator's first, each on the request as the one before left
 * it, and the first that answers or closes ends it: nothing the tunnel's
 * policy says can let through what an operator's rule refused (a rate
 * limit, an IP restriction, an authentication), since it never runs for a
 * request an operator's layer ended. For a response they run the other way
 * round, so an operator's response rules (a security header, a removed
 * header) have the last word over the tunnel's. Who the visitor is, once a
 * layer's authentication said it, stays what that layer said: a later
 * layer's own sign-in cannot rename the visitor an earlier one let in.
 */
import type { Coding } from "./compression.ts";
import type { PolicyInput } from "./facts.ts";
import { WorkingRequest, WorkingResponse } from "./message.ts";
import type { Outcome, Verdict } from "./outcome.ts";
import type { Policy, RunState } from "./policy.ts";
import type { Phase } from "./variables.ts";

export interface ChainOutcome {
  verdict: Verdict;
  /** Each layer's run, in the order they ran (a layer without rules for the phase did not run). */
  runs: Outcome[];
  request?: WorkingRequest;
  response?: WorkingResponse;
  identity?: string;
  compression?: Coding;
}

export class PolicyChain {
  /** `layers`: the operator's policies first (outermost first), the tunnel's own last. */
  constructor(readonly layers: readonly Policy[]) {}

  /** Whether any layer reads a request's body. */
  get readsBody(): boolean {
    return this.layers.some((p) => p.readsBody);
  }

  has(phase: Phase): boolean {
    return this.layers.some((p) => p.has(phase));
  }

  /** on_tcp_connect, operator first. */
  connect(input: PolicyInput): Promise<ChainOutcome> {
    return this.through("on_tcp_connect", this.layers, input);
  }

  /** on_http_request, operator first. */
  request(input: PolicyInput): Promise<ChainOutcome> {
    return this.through("on_http_request", this.layers, input);
  }

  /** on_http_response, the tunnel's own first and the operator's last. */
  response(input: PolicyInput): Promise<ChainOutcome> {
    return this.through("on_http_response", [...this.layers].reverse(), input);
  }

  /**
   * on_event_stream_message, in the response's order, judged on the
   * response's head (`input.response`), as the edge runs it after
   * on_http_response: the returned response's streamRewrites are the
   * sse-find-replace rules each event gets.
   */
  eventStream(input: PolicyInput): Promise<ChainOutcome> {
    return this.through("on_event_stream_message", [...this.layers].reverse(), input);
  }

  private async through(phase: Phase, layers: readonly Policy[], input: PolicyInput): Promise<ChainOutcome> {
    const now = input.now ?? Date.now();
    const facts = { ...input, now };
    const state: RunState = {
      request: input.request ? new WorkingRequest(input.request, now) : undefined,
      response: input.response ? new WorkingResponse(input.response) : undefined,
      identity: input.identity,
    };
    const runs: Outcome[] = [];
    let compression: Coding | undefined;
    for (const layer of layers) {
      if (!layer.has(phase)) continue;
      const out = await layer.runFrom(phase, facts, state);
      runs.push(out);
      state.identity ??= out.identity;
      compression ??= out.compression;
      if (out.verdict.kind !== "continue") return { verdict: out.verdict, runs, ...state, compression };
    }
    return { verdict: { kind: "continue" }, runs, ...state, compression };
  }
}
