/**
 * The agent's side of access rules: a server that predates them drops a
 * tunnel's `access` from the HELLO and would open it to anyone. The edge
 * marks each tunnel whose rules it took (READY's `access: true`); an agent
 * whose tunnel asked for rules and came back unmarked leaves at once
 * rather than serve the service unprotected.
 */
import { hasRules } from "../validate/access.ts";
import type { Ready, TunnelRequest } from "../protocol/messages.ts";

/** Refusals the agent makes itself, of a session the server granted (docs/reference/codes.md is made from this table). */
export const AGENT_REFUSALS = {
  ACCESS_UNSUPPORTED: {
    meaning: "The server granted a tunnel that asked for access rules without saying it enforces them (a server older than the rules): the agent leaves rather than serve the service unprotected, and the server frees the name.",
    advice: "Update burrow on the server, or run the tunnel without access rules.",
  },
} as const;

export const ACCESS_UNSUPPORTED = "ACCESS_UNSUPPORTED" satisfies keyof typeof AGENT_REFUSALS;

/** Why the session must end (a tunnel with rules granted without them), or undefined when all is well. */
export function unenforcedAccess(asked: readonly { name: string; request: TunnelRequest }[], ready: Ready): string | undefined {
  const grants = new Map(ready.tunnels.map((g, i) => [g.index ?? i, g]));
  const bare = asked.filter((t, i) => hasRules(t.request.access) && grants.has(i) && grants.get(i)!.access !== true);
  if (bare.length === 0) return undefined;
  return `the server does not enforce access rules (basic auth, OIDC, IP and header rules), so tunnel ${bare.map((t) => `'${t.name}'`).join(", ")} is not served unprotected: update burrow on the server`;
}
