/**
 * The TCP port range: binds a listener for a tcp tunnel on the port asked
 * for, or on any free one. A failed bind leaves nothing behind; a removed
 * tunnel closes its listener.
 */
import type { TCPSocketListener } from "bun";
import { AppError } from "../core/errors.ts";
import type { Registry, Tunnel } from "./registry.ts";
import type { SocketBudget } from "./socket-budget.ts";
import { tcpHandlers } from "./tcp.ts";

/** Random picks before scanning the range in order. */
const RANDOM_TRIES = 32;

export class PortAllocator {
  constructor(
    private readonly range: { first: number; last: number },
    private readonly host: string,
    private readonly registry: Registry,
    /** Caps on the tunnels' visitor connections, shared by every tunnel port. */
    private readonly budget?: SocketBudget,
    /** A visitor's connection on a tunnel port became a stream (the metrics count it). */
    private readonly opened?: () => void,
  ) {}

  /** Binds `requested` (or any free port) and returns the tunnel that `make` builds for it. */
  bind(requested: number | undefined, make: (port: number) => Tunnel): Tunnel {
    const { first, last } = this.range;
    if (requested !== undefined) {
      if (requested < first || requested > last) {
        throw new AppError("PORT_UNAVAILABLE", `port ${requested} is outside this server's TCP range ${first}-${last}`);
      }
      const t = this.tryBind(requested, make);
      if (!t) throw new AppError("PORT_UNAVAILABLE", `port ${requested} is in use`);
      return t;
    }
    const size = last - first + 1;
    for (let i = 0; i < Math.min(RANDOM_TRIES, size); i++) {
      const t = this.tryBind(first + Math.floor(Math.random() * size), make);
      if (t) return t;
    }
    for (let port = first; port <= last; port++) {
      const t = this.tryBind(port, make);
      if (t) return t;
    }
    throw new AppError("PORT_UNAVAILABLE", `no free port in ${first}-${last}`);
  }

  private tryBind(port: number, make: (port: number) => Tunnel): Tunnel | undefined {
    if (this.registry.portHolder(port)) return undefined;
    let tunnel: Tunnel | undefined;
    let listener: TCPSocketListener<any>;
    try {
      listener = Bun.listen({
        hostname: this.host,
        port,
        exclusive: true,
        allowHalfOpen: true,
        socket: tcpHandlers(() => tunnel!, this.budget, this.opened),
      });
    } catch {
      return undefined; // taken by something else on this machine
    }
    tunnel = make(port);
    tunnel.onRemoved = () => listener.stop(true);
    tunnel.stopAccepting = () => listener.stop(false);
    return tunnel;
  }
}
