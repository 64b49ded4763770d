/**
 * An AgentOutput that passes every event on to another, some of them
 * through handlers of its own first (the inspector hears of sessions and
 * flows, a pool member counts what is in flight). A plain object made once:
 * the events of every request go through it, and a property read of a
 * Proxy per event cost more than the event's own work.
 */
import type { AgentOutput } from "./output.ts";

/** Every event of AgentOutput: the compiler holds this list to the interface. */
const EVENTS: Record<keyof AgentOutput, true> = {
  ready: true,
  request: true,
  connection: true,
  flow: true,
  reconnecting: true,
  notice: true,
  refused: true,
  tunnelRefused: true,
  policyNote: true,
  policyPassed: true,
  tunnelAdded: true,
  tunnelRemoved: true,
  latency: true,
  streamOpened: true,
  webSocketClosed: true,
  inspector: true,
  restarting: true,
};
const NAMES = Object.keys(EVENTS) as (keyof AgentOutput)[];

/**
 * `out` with `own` handlers in front: each event `own` has goes to it (it
 * passes the event on itself), every other goes straight to `out`'s, bound
 * once. An event neither has stays absent, as optional events are.
 */
export function relayOutput(out: AgentOutput, own: Partial<AgentOutput>): AgentOutput {
  const relay: Partial<Record<keyof AgentOutput, unknown>> = {};
  for (const name of NAMES) {
    const mine = own[name];
    const theirs = out[name];
    if (mine !== undefined) relay[name] = mine;
    else if (typeof theirs === "function") relay[name] = (theirs as (...args: unknown[]) => void).bind(out);
  }
  return relay as AgentOutput;
}
