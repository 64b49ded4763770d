/**
 * tls tunnels' visitors: a TLS connection whose ClientHello names
 * `<name>.<domain>`, where a tls tunnel has that name, goes to the tunnel's
 * agent as it came, hello first, and on as bytes both ways (a "tls" stream,
 * protocol/messages.ts OpenMeta): the edge reads the name and nothing more,
 * never terminates, never holds a key. The front that read the hello
 * (sockets/tls-front.ts) asks here, on the public port (other names are
 * decrypted there) and on --tls-port (other names get unrecognized_name).
 *
 * Like a tcp tunnel's connection it has the tunnel's IP rules, checked
 * before anything reaches the agent, and a place in the visitors' budget
 * for raw connections.
 */
import type { Socket } from "bun";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import type { SocketRelay } from "../sockets/socket-stream.ts";
import type { Passthrough } from "../sockets/tls-front.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { Registry, Tunnel } from "./registry.ts";
import { takeToAgent } from "./tcp.ts";

export interface TlsTunnelRoutes {
  /** The passthrough for the tls tunnel the hello names, or undefined when it names none. */
  route(hello: ClientHello): Passthrough | undefined;
}

/** `opened`: a connection became a stream to the agent (counted with the tcp ones). */
export function tlsTunnelRoutes(registry: Registry, domain: string, budget: SocketBudget, opened?: () => void): TlsTunnelRoutes {
  const suffix = `.${domain}`;
  return {
    route(hello) {
      const name = hello.serverName;
      if (name === undefined || !name.endsWith(suffix)) return undefined;
      const label = name.slice(0, -suffix.length);
      if (label.includes(".")) return undefined;
      const tunnel = registry.tunnelBySubdomain(label);
      if (!tunnel || tunnel.protocol !== "tls" || !tunnel.agent) return undefined;
      return new TlsVisitor(tunnel, budget, opened);
    },
  };
}

/** One visitor's connection to a tls tunnel, from its hello to its close. */
class TlsVisitor implements Passthrough {
  private relay: SocketRelay | undefined;
  /** The address holding a place in the budget, until the connection closes. */
  private counted: string | undefined;

  constructor(
    private readonly tunnel: Tunnel,
    private readonly budget: SocketBudget,
    private readonly opened?: () => void,
  ) {}

  open(socket: Socket<unknown>, firstBytes: Uint8Array): void {
    const { counted, relay } = takeToAgent(socket, this.tunnel, this.budget, "tls");
    this.counted = counted;
    this.relay = relay;
    if (!relay) return;
    socket.setNoDelay(true);
    relay.socketData(firstBytes); // the hello, and whatever came with it
    this.opened?.();
  }

  data(_socket: Socket<unknown>, chunk: Uint8Array): void {
    this.relay?.socketData(chunk);
  }

  drain(): void {
    this.relay?.socketDrain();
  }

  end(): void {
    this.relay?.socketEnd();
  }

  close(_socket: Socket<unknown>, error?: Error): void {
    if (this.counted !== undefined) this.budget.release(this.counted);
    this.counted = undefined;
    this.relay?.socketClosed(error);
  }
}
