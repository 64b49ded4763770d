/**
 * A tls tunnel at the edge: reached by a name its visitors' ClientHello
 * says, passed through undecrypted (tls-tunnels.ts: the tls door, and from
 * other nodes the relayed-tls one). Only where a port passes names through
 * (TLS on the public port, or --tls-port) can it be had.
 */
import { AppError } from "../../core/errors.ts";
import type { EdgeKind } from "./edge-kind.ts";
import { placeByName } from "./named.ts";

export const tlsKind: EdgeKind<"tls"> = {
  address: (at, name) => at.tlsAddress(name),
  doors: ["tls", "relayed-tls"],
  unavailable(edge, plan) {
    if (edge.tlsAddress((plan.hostname ?? plan.subdomain)!) !== undefined) return undefined;
    return new AppError("TLS_UNAVAILABLE", "this server passes no TLS through by name (no TLS on its public port, no --tls-port)");
  },
  place: (edge, plan, owner, ctx) => placeByName(edge.registry, plan, owner, ctx),
};
