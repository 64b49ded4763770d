/**
 * Placing a tunnel of a kind reached by a name (http, tls): one name, one
 * tunnel, whichever kind.
 */
import { AppError } from "../../core/errors.ts";
import type { NamedKind } from "../../protocol/kinds.ts";
import { TunnelPool } from "../pool.ts";
import type { Registry, Tunnel } from "../registry.ts";
import type { Owner, PlaceContext, PlanOf } from "./edge-kind.ts";

/**
 * A new tunnel on its names, checked again against what this node holds now
 * (taken meanwhile by another session, between the rules' answer and now).
 * A pooled http tunnel joins the pool on its name, or starts one; the
 * token's own dropped tunnel gives its hostname to the new one.
 */
export function placeByName(registry: Registry, plan: PlanOf<NamedKind>, owner: Owner, ctx: PlaceContext): Tunnel {
  const names = { ...(plan.subdomain !== undefined ? { subdomain: plan.subdomain } : {}), ...(plan.hostname !== undefined ? { hostname: plan.hostname } : {}) };
  const pooled = "pool" in plan ? plan.pool : undefined;
  const skipWarning = "skipWarning" in plan ? plan.skipWarning : false;
  const held = registry.tunnelBySubdomain((plan.subdomain ?? plan.hostname)!);
  if (held?.pool && pooled && held.pool.userId === owner.userId && held.hostname === plan.hostname && held.subdomain === plan.subdomain) {
    const member = registry.newTunnel(plan.protocol, names, owner, skipWarning, ctx.memberId);
    held.pool.add(member);
    return member;
  }
  if (plan.subdomain !== undefined && registry.subdomainHolder(plan.subdomain)) {
    throw new AppError("SUBDOMAIN_TAKEN", `'${plan.subdomain}' is in use by another tunnel`);
  }
  if (plan.hostname !== undefined) {
    const holder = registry.tunnelBySubdomain(plan.hostname);
    // this token's tunnel, dropped (or in the session this one resumes), gives its hostname to the new one
    const own = holder && !holder.pool && holder.tokenId === owner.tokenId && (holder.agent === null || holder.agent.sessionId === ctx.resume);
    if (holder && !own) throw new AppError("HOSTNAME_IN_USE", `'${plan.hostname}' is in use by another tunnel`);
    if (holder) registry.remove(holder);
  }
  const t = registry.newTunnel(plan.protocol, names, owner, skipWarning, pooled ? ctx.memberId : undefined);
  if (pooled) new TunnelPool<Tunnel>(pooled, owner.userId).add(t);
  return t;
}
