/**
 * circuit-breaker: requests are refused with 503 while the service fails
 * too often, as ngrok has it. Over a rolling window (`window_duration` in
 * `num_buckets` buckets), once at least `volume_threshold` requests that
 * passed the rule ended and the share of them that failed (the service's
 * 5xx, or the edge's own 502/504 when no response came) reaches
 * `error_threshold`, the breaker trips: for `tripped_duration` every
 * request that reaches the rule is answered 503 without going on; then
 * one goes through to try the service, and its outcome closes the breaker
 * or trips it again (breaker.ts). The edge tells each request's outcome
 * when its response's status is known (WorkingRequest.breakers). Counted
 * per rule of a loaded policy and per node, in memory: each node of a
 * cluster trips on what it saw, and a policy changed starts afresh.
 * `enforce: false` never trips.
 */
import * as v from "valibot";
import { Breaker, type Admission } from "../breaker.ts";
import type { OutcomeWatcher } from "../message.ts";
import type { PolicyServices } from "../services.ts";
import { flag, parseDuration } from "./common.ts";
import { defineAction, textResponse, type ActionResult } from "./types.ts";

/** ngrok's bounds. */
const MAX_VOLUME = 2_000_000_000;
const MIN_DURATION_MS = 1000;
const MAX_DURATION_MS = 120_000;
/** ngrok fixes it at 10; burrow takes 1 to 128 (ngrok's API's bound). */
const MAX_BUCKETS = 128;
/** The code of a tripped breaker's refusal in its verdict (outcome.ts). */
export const CIRCUIT_OPEN = "CIRCUIT_OPEN";

const duration = v.optional(v.string(), "10s");

export const circuitBreaker = defineAction({
  type: "circuit-breaker",
  phases: ["on_http_request"],
  schema: v.strictObject({
    error_threshold: v.optional(v.pipe(v.number(), v.minValue(0), v.maxValue(1)), 0.5),
    volume_threshold: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_VOLUME)), 10),
    window_duration: duration,
    tripped_duration: duration,
    num_buckets: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(MAX_BUCKETS)), 10),
    enforce: flag,
  }),
  compile(config, tools) {
    const windowMs = durationOf(config.window_duration, "window_duration", tools.error);
    const trippedMs = durationOf(config.tripped_duration, "tripped_duration", tools.error);
    if (windowMs === undefined || trippedMs === undefined) return undefined;
    // never tripping, it counts nothing either
    if (!config.enforce) return { type: "circuit-breaker", run: () => NOT_ENFORCED };
    const breaker = new Breaker({ errorThreshold: config.error_threshold, volumeThreshold: config.volume_threshold, windowMs, trippedMs, buckets: config.num_buckets });
    // the two ways a request is let through, each told of its outcome by one object made once
    let passed: OutcomeWatcher | undefined;
    let probed: OutcomeWatcher | undefined;
    return {
      type: "circuit-breaker",
      run(ctx) {
        // a visit judged again (live-rejudge.ts: a pipe still open) went through when it came: a breaker bounds what comes
        if (ctx.bindings.input.rejudging) return PASSED;
        const now = ctx.services.now();
        const admission = breaker.admit(now);
        if (admission === "refuse") return refused(breaker, now);
        const request = ctx.bindings.request;
        if (request === undefined) return PASSED;
        const watcher = admission === "pass" ? (passed ??= watcherOf(breaker, "pass", ctx.services)) : (probed ??= watcherOf(breaker, "probe", ctx.services));
        (request.breakers ??= []).push(watcher);
        return admission === "probe" ? PROBED : PASSED;
      },
    };
  },
});

function durationOf(text: string, field: string, error: (at: readonly string[], message: string) => void): number | undefined {
  const ms = parseDuration(text);
  if (ms !== undefined && ms >= MIN_DURATION_MS && ms <= MAX_DURATION_MS) return ms;
  error([field], `${field}: '${text}' is not a duration from 1s to 2m (such as 10s, 30s, 1m)`);
  return undefined;
}

function watcherOf(breaker: Breaker, admission: Admission, services: PolicyServices): OutcomeWatcher {
  return {
    settle(outcome) {
      if (outcome === "uncounted") breaker.release(admission);
      else breaker.record(admission, outcome === "failed", services.now());
    },
  };
}

function refused(breaker: Breaker, now: number): ActionResult {
  const retry = String(Math.max(1, Math.ceil(breaker.retryAfter(now) / 1000)));
  return { kind: "respond", response: textResponse(503, "Service Unavailable: the tunnel's service failed too often of late; try again shortly.\n", [["retry-after", retry]]), note: "circuit open", code: CIRCUIT_OPEN };
}

const PASSED: ActionResult = { kind: "continue" };
const PROBED: ActionResult = { kind: "continue", note: "circuit half-open: this request tries the service" };
const NOT_ENFORCED: ActionResult = { kind: "continue", note: "not enforced" };
