/**
 * The runtime the agent's code uses: Bun's unless the npm package chose
 * Node's at load (sdk/src/index.ts). One module-level choice, read where a
 * socket is made, never per byte.
 */
import { bunRuntime } from "./bun.ts";
import type { AgentRuntime } from "./types.ts";

export let runtime: AgentRuntime = bunRuntime;

export function useRuntime(r: AgentRuntime): void {
  runtime = r;
}
