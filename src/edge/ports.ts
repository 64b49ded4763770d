/**
 * The TCP port range: binds a listener for a tcp tunnel on the port asked
 * for, or on any free one (port-search.ts: the order, what a failure
 * means). A failed bind leaves nothing behind; a removed tunnel closes its
 * listener.
 */
import type { TCPSocketListener, TCPSocketListenOptions } from "bun";
import { AppError } from "../core/errors.ts";
import { quietWarnings } from "../log.ts";
import type { Registry, Tunnel } from "./registry.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import { bindError, EVERY_PORT, ListenFailed, searchOrder } from "./port-search.ts";
import { tcpHandlers } from "./tcp.ts";

/** Bun.listen for TCP; tests give one that fails as they choose. */
export type Listen = <Data>(options: TCPSocketListenOptions<Data>) => TCPSocketListener<Data>;

export class PortAllocator {
  /** A search that meets the failure on every port it tries says so once every 10 s per code, not once per port. */
  private readonly failure = quietWarnings(10_000, Date.now, "error");

  constructor(
    readonly range: { first: number; last: number },
    private readonly host: string,
    private readonly registry: Registry,
    /** Caps on the tunnels' visitor connections, shared by every tunnel port. */
    private readonly budget?: SocketBudget,
    /** A visitor's connection on a tunnel port became a stream (the metrics count it). */
    private readonly opened?: () => void,
    private readonly listen: Listen = Bun.listen,
    /** What a visitor may send while its on_tcp_connect runs (--policy-connect-max-bytes). */
    private readonly maxEarlyBytes?: number,
  ) {}

  /** Binds `requested` (or any free port) and returns the tunnel that `make` builds for it. */
  bind(requested: number | undefined, make: (port: number) => Tunnel): Tunnel {
    const { first, last } = this.range;
    if (requested !== undefined) {
      if (requested < first || requested > last) {
        throw new AppError("PORT_UNAVAILABLE", `port ${requested} is outside this server's TCP range ${first}-${last}`);
      }
      const t = this.tryBind(requested, make);
      if (t === "taken") throw new AppError("PORT_UNAVAILABLE", `port ${requested} is in use`);
      if (t instanceof ListenFailed) throw t.refusal();
      return t;
    }
    // a failure on one port (EACCES below 1024, say) may not be another's: the search goes on, and if
    // no port is found the agent hears that failure rather than "no free port"
    let failed: ListenFailed | undefined;
    const attempt = (port: number): Tunnel | undefined => {
      const t = this.tryBind(port, make);
      if (t === "taken") return undefined;
      if (!(t instanceof ListenFailed)) return t;
      if (EVERY_PORT.has(t.code)) throw t.refusal();
      failed ??= t;
      return undefined;
    };
    for (const port of searchOrder(this.range)) {
      const t = attempt(port);
      if (t) return t;
    }
    throw failed ? failed.refusal() : new AppError("PORT_UNAVAILABLE", `no free port in ${first}-${last}`);
  }

  private tryBind(port: number, make: (port: number) => Tunnel): Tunnel | "taken" | ListenFailed {
    if (this.registry.portHolder(port)) return "taken";
    let tunnel: Tunnel | undefined;
    let listener: TCPSocketListener<unknown>;
    try {
      listener = this.listen({
        hostname: this.host,
        port,
        exclusive: true,
        allowHalfOpen: true,
        // a pooled port's connections go to a member in rotation (edge/pool.ts)
        socket: tcpHandlers(() => tunnel!.pool?.pick() ?? tunnel!, this.budget, this.opened, this.maxEarlyBytes),
      });
    } catch (err) {
      const failed = bindError(port, err);
      if (failed === "taken") return failed;
      this.failure(failed.code, "tcp tunnel port could not be listened on", { port, host: this.host, code: failed.code, err: failed.err });
      return failed;
    }
    tunnel = make(port);
    // a pool's listener is the pool's: it stops with the last member
    if (tunnel.pool) tunnel.pool.onEmpty = () => listener.stop(true);
    else tunnel.onRemoved = () => listener.stop(true);
    tunnel.stopAccepting = () => listener.stop(false);
    return tunnel;
  }
}
