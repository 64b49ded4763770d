/**
 * At start, the names the server before us (same data dir) had live when
 * it stopped (restart-holds.ts): held for their tokens a while, and with
 * several nodes claimed over all of them.
 */
import { log } from "../log.ts";
import type { OtherNodes } from "./other-nodes.ts";
import { TunnelPool } from "./pool.ts";
import type { Registry, Tunnel } from "./registry.ts";
import { takeHolds } from "./restart-holds.ts";

/** The names held, and `claimed`, which settles when they are claimed over every node (at once on one node). */
export function holdNamesOfTheServerBefore(holdsFile: string | undefined, registry: Registry, nodes: OtherNodes | undefined): { names: Set<string>; claimed: Promise<void> } {
  const names = new Set<string>();
  const claims: Promise<void>[] = [];
  if (!holdsFile) return { names, claimed: Promise.resolve() };
  // a pool's members are held in one pool, each for its token
  const pools = new Map<string, TunnelPool<Tunnel>>();
  for (const h of takeHolds(holdsFile)) {
    const address = { ...(h.subdomain !== undefined ? { subdomain: h.subdomain } : {}), ...(h.hostname !== undefined ? { hostname: h.hostname } : {}) };
    const tunnel = registry.newTunnel(h.protocol, address, h, h.skipWarning);
    const name = (h.subdomain ?? h.hostname)!;
    if (h.pool && h.protocol === "http") {
      const pool = pools.get(name) ?? new TunnelPool<Tunnel>(h.pool, h.userId);
      pools.set(name, pool);
      pool.add(tunnel);
    }
    if (!registry.hold(tunnel)) continue;
    if (nodes) claims.push(nodes.holdAtStart(tunnel));
    for (const n of [h.subdomain, h.hostname]) if (n !== undefined) names.add(n);
  }
  if (names.size > 0) log.info("holding names for the agents of the server before", { names: names.size });
  return { names, claimed: Promise.all(claims).then(() => {}) };
}
