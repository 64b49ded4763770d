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
import { canonicalAddress } from "../http/addresses.ts";
import { limitedLog } from "../log.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import { SocketRelay } from "../sockets/socket-stream.ts";
import type { Passthrough } from "../sockets/tls-front.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { Registry, Tunnel } from "./registry.ts";

const overLimit = limitedLog(10);
const refusedByRules = limitedLog(10);

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
    const t = this.tunnel;
    if (typeof socket.remoteAddress !== "string") return void socket.terminate();
    const address = canonicalAddress(socket.remoteAddress);
    if (t.access?.refusesAddress(address)) {
      refusedByRules("tls visitor refused by the tunnel's IP rules", { client: address, tunnel: t.subdomain });
      return void socket.terminate();
    }
    if (!this.budget.admit(address)) {
      overLimit("tls visitor connection refused", { client: address });
      return void socket.terminate();
    }
    this.counted = address;
    const stream = t.agent?.openStream({
      tunnel: t.id,
      kind: "tls",
      remote: `${socket.remoteAddress}:${socket.remotePort ?? 0}`,
      local: `${socket.localAddress}:${socket.localPort}`,
    });
    // no agent (reconnecting) or it cannot take another stream
    if (!stream) return void socket.end();
    socket.setNoDelay(true);
    this.relay = new SocketRelay(socket, stream, { fromSocket: (n) => t.countIn(n), toSocket: (n) => t.countOut(n) });
    this.relay.socketData(firstBytes);
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
