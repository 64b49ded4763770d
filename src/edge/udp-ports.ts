/**
 * The UDP port range (--udp-ports), a port space of its own: udp 20000 and
 * tcp 20000 are two tunnels. Binds a socket for a udp tunnel on the port
 * asked for, or on any free one (port-search.ts: the order, what a failure
 * means).
 *
 * Binding a UDP socket is asynchronous (Bun.udpSocket), a TCP listener
 * not: so a HELLO's udp ports are bound before its tunnels are opened
 * (agent-tunnels.ts), and the tunnel adopts the port it was given. A port no
 * tunnel adopted (the HELLO refused meanwhile, the agent gone) is closed
 * by whoever bound it.
 */
import type { udp } from "bun";
import { AppError } from "../core/errors.ts";
import { quietWarnings } from "../log.ts";
import { bindError, EVERY_PORT, ListenFailed, searchOrder } from "./port-search.ts";
import type { Registry } from "./registry.ts";
import { UdpTunnelPort, type UdpFlowRules } from "./udp-flows.ts";
import { SourceRate } from "../core/source-rate.ts";

/** What a udp tunnel's flows are held to when the options do not say (the server's flags' defaults). */
export const UDP_DEFAULTS = { idleMs: 60_000, flows: 1024, rate: 1000 };
/** Sources the per-source datagram rate remembers at most; past it the one idle longest is forgotten. */
const UDP_RATE_SOURCES = 100_000;

/** The udp ports of `range` with the server's settings (UDP_DEFAULTS where unsaid); undefined with no range (--udp-ports off). */
export function udpPortsFor(
  range: { first: number; last: number } | undefined,
  host: string,
  registry: Registry,
  settings: { idleMs?: number; flows?: number; rate?: number },
  counters: UdpFlowRules["counters"],
): UdpPortAllocator | undefined {
  if (!range) return undefined;
  const rate = settings.rate ?? UDP_DEFAULTS.rate;
  return new UdpPortAllocator(range, host, registry, {
    idleMs: settings.idleMs ?? UDP_DEFAULTS.idleMs,
    maxFlows: settings.flows ?? UDP_DEFAULTS.flows,
    // one bucket per source over every udp tunnel; the sources remembered are bounded as the DNS responder's are
    rate: rate > 0 ? new SourceRate({ perClientPerSecond: rate, perClientBurst: 2 * rate, maxClients: UDP_RATE_SOURCES }) : undefined,
    counters,
  });
}

/** Bun.udpSocket; tests give one that fails as they choose. */
export type UdpBind = (options: udp.SocketOptions<"buffer">) => Promise<udp.Socket<"buffer">>;

export class UdpPortAllocator {
  private readonly failure = quietWarnings(10_000, Date.now, "error");

  constructor(
    readonly range: { first: number; last: number },
    private readonly host: string,
    private readonly registry: Registry,
    private readonly rules: UdpFlowRules,
    private readonly bindSocket: UdpBind = (options) => Bun.udpSocket(options),
  ) {}

  /** Binds `requested` (or any free port); throws PORT_UNAVAILABLE. */
  async bind(requested: number | undefined): Promise<UdpTunnelPort> {
    const { first, last } = this.range;
    if (requested !== undefined) {
      if (requested < first || requested > last) {
        throw new AppError("PORT_UNAVAILABLE", `port ${requested} is outside this server's UDP range ${first}-${last}`);
      }
      const p = await this.tryBind(requested);
      if (p === "taken") throw new AppError("PORT_UNAVAILABLE", `UDP port ${requested} is in use`);
      if (p instanceof ListenFailed) throw p.refusal();
      return p;
    }
    // as for TCP: a failure on one port may not be another's, and is what the agent hears if no port is found
    let failed: ListenFailed | undefined;
    for (const port of searchOrder(this.range)) {
      const p = await this.tryBind(port);
      if (p === "taken") continue;
      if (!(p instanceof ListenFailed)) return p;
      if (EVERY_PORT.has(p.code)) throw p.refusal();
      failed ??= p;
    }
    throw failed ? failed.refusal() : new AppError("PORT_UNAVAILABLE", `no free UDP port in ${first}-${last}`);
  }

  private async tryBind(port: number): Promise<UdpTunnelPort | "taken" | ListenFailed> {
    if (this.registry.udpPortHolder(port)) return "taken";
    let owner: UdpTunnelPort | undefined;
    try {
      const socket = await this.bindSocket({
        hostname: this.host,
        port,
        binaryType: "buffer",
        socket: {
          data: (_s, data, fromPort, fromAddress) => owner?.received(data, fromPort, fromAddress),
          // an ICMP error for a visitor gone: nothing to do, the datagram was the network's to lose
          error: () => {},
        },
      });
      owner = new UdpTunnelPort(socket, this.rules);
      return owner;
    } catch (err) {
      const failed = bindError(port, err);
      if (failed === "taken") return failed;
      this.failure(failed.code, "udp tunnel port could not be bound", { port, host: this.host, code: failed.code, err: failed.err });
      return failed;
    }
  }
}
