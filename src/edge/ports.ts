/**
 * The TCP port range: binds a listener for a tcp tunnel on the port asked
 * for, or on any free one. A failed bind leaves nothing behind; a removed
 * tunnel closes its listener.
 *
 * Only EADDRINUSE means "taken, try another port". Any other listen error
 * (out of descriptors, not permitted, an address not of this machine) is a
 * failure of the server, not of the port: it is logged with its code and
 * the agent is told that cause (still PORT_UNAVAILABLE, the code tunnels
 * are refused ports with), not that every port is taken.
 */
import type { TCPSocketListener, TCPSocketListenOptions } from "bun";
import { AppError } from "../core/errors.ts";
import { quietWarnings } from "../log.ts";
import type { Registry, Tunnel } from "./registry.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import { tcpHandlers } from "./tcp.ts";

/** Random picks before scanning the range in order. */
const RANDOM_TRIES = 32;

/** Bun.listen for TCP; tests give one that fails as they choose. */
export type Listen = <Data>(options: TCPSocketListenOptions<Data>) => TCPSocketListener<Data>;

/** Listen errors that every port would meet alike (the process or the system is out of descriptors): no other port is tried. */
const EVERY_PORT = new Set(["EMFILE", "ENFILE"]);

/** What the agent is told, beside the code. */
const CAUSES: Record<string, string> = {
  EMFILE: "the server has too many open files",
  ENFILE: "the server's system has too many open files",
  EACCES: "the server is not permitted to listen on it",
  EADDRNOTAVAIL: "the server's --host is not an address of its machine",
};

/** A listen error that is not EADDRINUSE. */
class ListenFailed {
  constructor(
    readonly port: number,
    readonly code: string,
    readonly err: string,
  ) {}

  refusal(): AppError {
    const cause = CAUSES[this.code] ?? "listening failed";
    return new AppError("PORT_UNAVAILABLE", `port ${this.port} could not be listened on: ${cause} (${this.code})`);
  }
}

export class PortAllocator {
  /** A search that meets the failure on every port it tries says so once every 10 s per code, not once per port. */
  private readonly failure = quietWarnings(10_000, Date.now, "error");

  constructor(
    private readonly range: { first: number; last: number },
    private readonly host: string,
    private readonly registry: Registry,
    /** Caps on the tunnels' visitor connections, shared by every tunnel port. */
    private readonly budget?: SocketBudget,
    /** A visitor's connection on a tunnel port became a stream (the metrics count it). */
    private readonly opened?: () => void,
    private readonly listen: Listen = Bun.listen,
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
    const size = last - first + 1;
    for (let i = 0; i < Math.min(RANDOM_TRIES, size); i++) {
      const t = attempt(first + Math.floor(Math.random() * size));
      if (t) return t;
    }
    for (let port = first; port <= last; port++) {
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
        socket: tcpHandlers(() => tunnel!, this.budget, this.opened),
      });
    } catch (err) {
      const code = (err as { code?: unknown }).code;
      if (code === "EADDRINUSE") return "taken"; // something else on this machine has it
      const failed = new ListenFailed(port, typeof code === "string" ? code : "UNKNOWN", String(err));
      this.failure(failed.code, "tcp tunnel port could not be listened on", { port, host: this.host, code: failed.code, err: failed.err });
      return failed;
    }
    tunnel = make(port);
    tunnel.onRemoved = () => listener.stop(true);
    tunnel.stopAccepting = () => listener.stop(false);
    return tunnel;
  }
}
