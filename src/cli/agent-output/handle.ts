import type { AgentOutput } from "../../agent/output.ts";

/** An output the agent's run ends: finish() puts the terminal back and writes what is pending. */
export interface OutputHandle extends AgentOutput {
  finish(): Promise<void>;
}
