/**
 * The agent's side of access rules and traffic policies: a server that
 * predates them drops a tunnel's `access` (or `policy`) from the HELLO and
 * would open it to anyone. The edge marks each tunnel whose rules it took
 * (READY's `access: true`, `policy: true`); an agent whose tunnel asked
 * for rules or sent a policy and came back unmarked leaves at once rather
 * than serve the service unprotected.
 */
import { hasRules } from "../validate/access.ts";
import type { Ready, TunnelRequest } from "../protocol/messages.ts";

/** Refusals the agent makes itself, of a session the server granted (docs/reference/codes.md is made from this table). */
export const AGENT_REFUSALS = {
  ACCESS_UNSUPPORTED: {
    meaning: "The server granted a tunnel that asked for access rules without saying it enforces them (a server older than the rules): the agent leaves rather than serve the service unprotected, and the server frees the name.",
    advice: "Update burrow on the server, or run the tunnel without access rules.",
  },
  REMOTE_UNSUPPORTED: {
    meaning: "`burrow start --remote`: the server does not keep devices' tunnels (its READY does not say it takes changes on a live connection: a server older than remote configs).",
    advice: "Update burrow on the server, or run the tunnels from a burrow.yml.",
  },
  POLICY_UNSUPPORTED: {
    meaning: "The server granted a tunnel that sent a traffic policy (`--policy-file`, `policy:`) without saying it runs it (a server older than traffic policies): the agent leaves rather than serve the service without its rules, and the server frees the name.",
    advice: "Update burrow on the server, or run the tunnel without a policy.",
  },
} as const;

export const ACCESS_UNSUPPORTED = "ACCESS_UNSUPPORTED" satisfies keyof typeof AGENT_REFUSALS;
export const POLICY_UNSUPPORTED = "POLICY_UNSUPPORTED" satisfies keyof typeof AGENT_REFUSALS;
export const REMOTE_UNSUPPORTED = "REMOTE_UNSUPPORTED" satisfies keyof typeof AGENT_REFUSALS;

/** Why the session must end (a tunnel with rules or a policy granted without them), or undefined when all is well. */
export function unenforcedAccess(asked: readonly { name: string; request: TunnelRequest }[], ready: Ready): { code: keyof typeof AGENT_REFUSALS; message: string } | undefined {
  const grants = new Map(ready.tunnels.map((g, i) => [g.index ?? i, g]));
  const bare = asked.filter((t, i) => hasRules(t.request.access) && grants.has(i) && grants.get(i)!.access !== true);
  if (bare.length > 0) {
    return {
      code: ACCESS_UNSUPPORTED,
      message: `the server does not enforce access rules (basic auth, OIDC, IP and header rules), so tunnel ${bare.map((t) => `'${t.name}'`).join(", ")} is not served unprotected: update burrow on the server`,
    };
  }
  const unrun = asked.filter((t, i) => policyOf(t.request) !== undefined && grants.has(i) && grants.get(i)!.policy !== true);
  if (unrun.length > 0) {
    return {
      code: POLICY_UNSUPPORTED,
      message: `the server does not run traffic policies, so tunnel ${unrun.map((t) => `'${t.name}'`).join(", ")} is not served without its policy: update burrow on the server`,
    };
  }
  return undefined;
}

/** A tunnel request's own policy text, for the kinds that carry one. */
const policyOf = (r: TunnelRequest): string | undefined => ("policy" in r ? r.policy : undefined);
