/**
 * A udp tunnel at the edge: a port of the UDP port space (apart from tcp's),
 * bound before the tunnels open (binding is asynchronous), each datagram a
 * visit through the port's own door (udp-flows.ts); privately, connectors'
 * flows through the private door.
 */
import { AppError } from "../../core/errors.ts";
import type { BoundUdpPort, EdgeKind } from "./edge-kind.ts";

export const udpKind: EdgeKind<"udp"> = {
  address: (at, _name, port) => at.udpAddress(port),
  doors: ["udp", "private", "relayed-private"],
  async prepare(edge, plan) {
    const ports = edge.udpPorts;
    if (!ports) return new AppError("UDP_UNAVAILABLE", "this server takes no udp tunnels (--udp-ports off)");
    try {
      return await ports.bind(plan.port);
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      return err;
    }
  },
  /** On the port bound for it (prepare), or that port's refusal. */
  place(edge, _plan, owner, ctx) {
    const bound = ctx.prepared;
    if (bound instanceof AppError) throw bound;
    // its port was held in grace when bound, and has been let go since: the agent asks again
    if (!bound) throw new AppError("PORT_UNAVAILABLE", "the UDP port was let go during the handshake; try again");
    return (bound as BoundUdpPort).adopt(edge.registry.newTunnel("udp", { port: (bound as BoundUdpPort).port }, owner, false));
  },
};
