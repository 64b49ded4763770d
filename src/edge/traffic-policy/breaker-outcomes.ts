/**
 * The circuit breakers a request passed (policy/actions/circuit-breaker.ts)
 * told what came of it, once: its response's status when its head is known,
 * else a failure when the exchange ends with none (the agent or its service
 * gone, the wait timed out: the edge's 502/504), or nothing when the
 * visitor left first. A request no breaker let through costs one field read.
 */
import type { LayeredRun } from "./layered-run.ts";

/** The response's head is known: a 5xx counts as a failure. */
export function breakersAnswered(run: LayeredRun | undefined, status: number): void {
  if (run?.request?.breakers === undefined) return;
  settle(run, status >= 500 ? "failed" : "ok");
}

/** The exchange ended: with no response told, it failed (`visitorLeft`: the visitor went first, nothing to count). */
export function breakersEnded(run: LayeredRun | undefined, visitorLeft = false): void {
  if (run?.request?.breakers === undefined) return;
  settle(run, visitorLeft ? "uncounted" : "failed");
}

/** Whether a breaker waits on the request's outcome (a path that otherwise reads no response head must then read it). */
export function breakersWait(run: LayeredRun): boolean {
  return run.request?.breakers !== undefined;
}

function settle(run: LayeredRun, outcome: "ok" | "failed" | "uncounted"): void {
  const request = run.request!;
  const watchers = request.breakers!;
  request.breakers = undefined;
  for (const w of watchers) w.settle(outcome);
}
