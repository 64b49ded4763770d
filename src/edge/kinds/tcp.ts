/**
 * A tcp tunnel at the edge: a public port of its own (or one shared by a
 * pool of the user's agents), each connection a visit through the tcp door
 * (edge/tcp.ts); privately, connectors' streams through the private door.
 */
import { TunnelPool } from "../pool.ts";
import type { Tunnel } from "../registry.ts";
import type { EdgeKind } from "./edge-kind.ts";

export const tcpKind: EdgeKind<"tcp"> = {
  address: (at, _name, port) => at.tcpAddress(port),
  doors: ["tcp", "private", "relayed-private"],
  /** On its port: a pooled one joins the user's pool on the port asked, or starts one. */
  place(edge, plan, owner) {
    const { registry, ports } = edge;
    const held = plan.port !== undefined ? registry.portHolder(plan.port) : undefined;
    if (held?.pool && plan.pool && held.pool.userId === owner.userId) {
      const member = registry.newTunnel("tcp", { port: plan.port }, owner, false);
      held.pool.add(member);
      member.stopAccepting = held.stopAccepting;
      return member;
    }
    return ports.bind(plan.port, (port) => {
      const t = registry.newTunnel("tcp", { port }, owner, false);
      if (plan.pool) new TunnelPool<Tunnel>(plan.pool, owner.userId).add(t);
      return t;
    });
  },
};
