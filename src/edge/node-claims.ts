/**
 * Several nodes: a HELLO's names claimed over every node before its
 * tunnels go live here (agent-handshake.ts), so no two agents on two nodes
 * hold one name. What is claimed and not taken by a tunnel is given back by
 * the handshake.
 */
import type { Admitted } from "../core/admission.ts";
import { AppError } from "../core/errors.ts";
import { isNamedKind } from "../protocol/kinds.ts";
import type { Hello } from "../protocol/messages.ts";
import type { EdgeContext } from "./agent-context.ts";
import { responseTimeout } from "./kinds/http.ts";
import type { OtherNodes } from "./other-nodes.ts";

/** What a handshake claimed over the cluster: names, and pool members' ids by the HELLO's index. */
export interface Claimed {
  names: string[];
  members: Map<number, string>;
}

/** The refusal of a name another node holds. */
function taken(lost: string, hostname: string | undefined): AppError {
  return lost === hostname ? new AppError("HOSTNAME_IN_USE", `'${lost}' is in use by another tunnel`) : new AppError("SUBDOMAIN_TAKEN", `'${lost}' is in use by another tunnel`);
}

/**
 * Claims the HELLO's names cluster-wide, in its order: a name another node
 * holds is SUBDOMAIN_TAKEN, for that tunnel (partial) or the whole HELLO.
 * A pooled http tunnel joins its pool over every node, as a member whose
 * id is chosen here. Returns the names claimed and the members joined.
 */
export async function claimOverNodes(cluster: OtherNodes, edge: EdgeContext, sessionId: string, hello: Pick<Hello, "tunnels" | "partial">, admitted: Admitted): Promise<Claimed> {
  const claimed: string[] = [];
  const members = new Map<number, string>();
  const giveBack = async () => {
    for (const name of claimed) await cluster.release(name);
    for (const id of members.values()) await cluster.dropMember(id);
  };
  const owner = { userId: admitted.user.id, username: admitted.user.username, tokenId: admitted.token.id };
  for (const [i, plan] of admitted.tunnels.entries()) {
    if (plan instanceof AppError || !isNamedKind(plan)) continue;
    const asked = hello.tunnels[i];
    // what another node relaying to it needs; its access rules are applied here, where they live (cluster/relay.ts)
    const serving = {
      skipWarning: plan.protocol === "http" && plan.skipWarning,
      responseTimeoutMs: asked?.protocol === "http" ? responseTimeout(edge.maxResponseTimeoutMs, asked.responseTimeout) : undefined,
      protocol: plan.protocol,
    };
    // the first name's row is the tunnel's; a hostname beside a subdomain is its twin (cluster/cluster-names.ts)
    const names = [plan.subdomain, plan.hostname].filter((n): n is string => n !== undefined);
    let lost: string | undefined;
    if (plan.protocol === "http" && plan.pool) {
      const id = crypto.randomUUID();
      lost = await cluster.joinPool(names, id, owner, sessionId, { ...serving, pool: plan.pool });
      if (lost === undefined) {
        members.set(i, id);
        continue;
      }
    } else {
      const won: string[] = [];
      for (const name of names) {
        const twin = name !== names[0];
        if (!(await cluster.claim(name, owner, sessionId, admitted.resume, { ...serving, twin, ...(!twin && names[1] !== undefined ? { hostname: names[1] } : {}) }))) break;
        won.push(name);
      }
      if (won.length === names.length) {
        claimed.push(...won);
        continue;
      }
      for (const name of won) await cluster.release(name);
      lost = names[won.length]!;
    }
    if (!hello.partial) {
      await giveBack();
      throw taken(lost, plan.hostname);
    }
    admitted.tunnels[i] = taken(lost, plan.hostname);
  }
  const first = admitted.tunnels[0];
  if (admitted.tunnels.every((p) => p instanceof AppError) && first instanceof AppError) throw first;
  return { names: claimed, members };
}
