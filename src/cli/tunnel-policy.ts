/**
 * A tunnel's own traffic policy on the agent's side (`--policy-file`,
 * burrow.yml's `policy:`): read, then loaded as the edge will load it, so
 * a mistake is told with its line before anything connects (the edge
 * loads it again at the handshake, under its own caps: POLICY_INVALID).
 */
import { readFileSync, statSync } from "node:fs";
import { formatPolicyError, loadPolicy, PHASES } from "../policy/index.ts";
import { TUNNEL_POLICY_MAX_CHARS } from "../protocol/messages.ts";
import { UsageError } from "../usage-error.ts";
import { HTTP_RULES_ON_RAW } from "../edge/traffic-policy/edge-policies.ts";

/** The errors shown at most; `burrow policy check` shows them all. */
const ERRORS_SHOWN = 10;

/** A policy file's text; a usage error when it cannot be read, or is larger than a handshake carries. */
export function readTunnelPolicy(path: string, flag: string): string {
  try {
    // characters are at least a byte each: a larger file cannot fit
    if (statSync(path).size > 4 * TUNNEL_POLICY_MAX_CHARS) throw new UsageError(`${flag} ${path}: larger than a tunnel's own policy may be (${TUNNEL_POLICY_MAX_CHARS / 1024} KiB: it travels in the handshake)`);
    return readFileSync(path, "utf8");
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`${flag} ${path}: cannot read it (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
}

/** The policy loaded and thrown away: its errors, with `source`'s lines, as a usage error. */
export function checkTunnelPolicy(text: string, source: string, http: boolean, tunnel?: string): void {
  const loaded = loadPolicy(text, { source });
  if (!Array.isArray(loaded)) {
    if (!http && (loaded.has("on_http_request") || loaded.has("on_http_response") || loaded.has("on_event_stream_message"))) throw new UsageError(`${tunnel ? `tunnel ${tunnel}: ` : ""}${source}: ${HTTP_RULES_ON_RAW}`);
    return;
  }
  const shown = loaded.slice(0, ERRORS_SHOWN).map((e) => formatPolicyError(e, source));
  if (loaded.length > ERRORS_SHOWN) shown.push(`(and ${loaded.length - ERRORS_SHOWN} more: burrow policy check ${source})`);
  throw new UsageError(`${tunnel ? `tunnel ${tunnel}: ` : ""}the traffic policy does not load:\n${shown.join("\n")}`);
}

/** "policy (2 rules)", for burrow config check. */
export function describePolicy(text: string): string {
  const loaded = loadPolicy(text);
  if (Array.isArray(loaded)) return "policy";
  const n = PHASES.reduce((sum, p) => sum + loaded.size[p], 0);
  return `policy (${n} rule${n === 1 ? "" : "s"})`;
}
