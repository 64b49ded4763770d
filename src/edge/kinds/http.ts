/**
 * An http tunnel at the edge: reached by a name (a subdomain, a verified
 * hostname, or a pool's name it shares), its visitors' requests through the
 * HTTP door (http-door.ts), HTTP/2 streams through the same door's h2 one
 * (h2/door.ts) and, from other nodes, the relayed-http one. It
 * keeps what its agent asked of the edge: how long to wait for its
 * service's answer, the upgrades it takes besides WebSocket, the warning.
 */
import type { EdgeKind } from "./edge-kind.ts";
import { placeByName } from "./named.ts";

/** What the agent asked to wait for its service, in ms, held to the server's maximum. */
export function responseTimeout(maxMs: number | undefined, askedS: number | undefined): number | undefined {
  if (askedS === undefined || maxMs === undefined) return undefined;
  return Math.min(Math.round(askedS * 1000), maxMs);
}

export const httpKind: EdgeKind<"http"> = {
  // a custom hostname is what its owner asked to be reached by: the name given is it when there is one
  address: (at, name) => at.httpUrl(name),
  doors: ["http", "h2", "relayed-http", "private"],
  place: (edge, plan, owner, ctx) => placeByName(edge.registry, plan, owner, ctx),
  keep(edge, t, plan, asked) {
    t.skipWarning = plan.skipWarning;
    t.responseTimeoutMs = responseTimeout(edge.maxResponseTimeoutMs, asked?.responseTimeout);
    t.allowUpgrade = asked?.allowUpgrade?.length ? new Set(asked.allowUpgrade.map((u) => u.toLowerCase())) : undefined;
  },
};
