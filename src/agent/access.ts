/**
 * The agent's side of access rules: a server that predates them drops a
 * tunnel's `access` from the HELLO and would open it to anyone. The edge
 * marks each tunnel whose rules it took (READY's `access: true`); an agent
 * whose tunnel asked for rules and came back unmarked leaves at once
 * rather than serve the service unprotected.
 */
import { hasRules } from "../validate/access.ts";
import type { Ready, TunnelRequest } from "../protocol/messages.ts";

export const ACCESS_UNSUPPORTED = "ACCESS_UNSUPPORTED";

/** Why the session must end (a tunnel with rules granted without them), or undefined when all is well. */
export function unenforcedAccess(asked: readonly { name: string; request: TunnelRequest }[], ready: Ready): string | undefined {
  const grants = new Map(ready.tunnels.map((g, i) => [g.index ?? i, g]));
  const bare = asked.filter((t, i) => hasRules(t.request.access) && grants.has(i) && grants.get(i)!.access !== true);
  if (bare.length === 0) return undefined;
  return `the server does not enforce access rules (basic auth, OIDC, IP and header rules), so tunnel ${bare.map((t) => `'${t.name}'`).join(", ")} is not served unprotected: update burrow on the server`;
}
