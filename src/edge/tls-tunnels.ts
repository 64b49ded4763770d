/**
 * tls tunnels' visitors: a TLS connection whose ClientHello names
 * `<name>.<domain>`, where a tls tunnel has that name, goes to the tunnel's
 * agent as it came, hello first, and on as bytes both ways (a "tls" stream,
 * protocol/messages.ts OpenMeta): the edge reads the name and nothing more,
 * never terminates, never holds a key. The front that read the hello
 * (sockets/tls-front.ts) asks here, on the public port (other names are
 * decrypted there) and on --tls-port (other names get unrecognized_name).
 *
 * Like a tcp tunnel's connection it passes the judgement's steps through
 * its door (tcp.ts ConnectionDoor: the hello's name, the kind, the
 * tunnel's IP rules, a place in the visitors' budget for raw connections),
 * before anything reaches the agent.
 *
 * With several nodes, a name no tunnel of this node has is looked up among
 * the others' (OtherNodes.find, cached): another node's tls tunnel is
 * reached through the relay link to that node, which applies its IP rules
 * (cluster/relay.ts), undecrypted all the way.
 */
import type { Socket } from "bun";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import type { SocketRelay } from "../sockets/socket-stream.ts";
import { TlsFront, type Passthrough } from "../sockets/tls-front.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import { Tunnel, type Registry } from "./registry.ts";
import { connectionClosed, ConnectionDoor, heldEarly, judgeConnection, type ConnectionVisit } from "./tcp.ts";

export interface TlsTunnelRoutes {
  /**
   * The passthrough for the tls tunnel the hello names, or `otherwise` when
   * it names none; later when another node must be asked.
   */
  route<T>(hello: ClientHello, otherwise: T): Passthrough | T | Promise<Passthrough | T>;
}

/** Another node's tunnel by name (OtherNodes.find): a tunnel reached through a relay link, a page, or none. */
type FindElsewhere = (name: string) => Promise<Tunnel | Response | undefined> | Tunnel | Response | undefined;

/** `opened`: a connection became a stream to the agent (counted with the tcp ones). `elsewhere`: with several nodes. `maxEarlyBytes`: --policy-connect-max-bytes. */
export function tlsTunnelRoutes(registry: Registry, domain: string, budget: SocketBudget, opened?: () => void, elsewhere?: FindElsewhere, maxEarlyBytes?: number): TlsTunnelRoutes {
  const suffix = `.${domain}`;
  const door = new ConnectionDoor("tls", budget, maxEarlyBytes);
  return {
    route(hello, otherwise) {
      const name = hello.serverName;
      if (name === undefined) return otherwise;
      // a subdomain under the domain, or a custom hostname as it is (it has dots; a subdomain never)
      const label = name.endsWith(suffix) ? name.slice(0, -suffix.length) : name.includes(".") ? name : undefined;
      if (label === undefined || (name.endsWith(suffix) && label.includes("."))) return otherwise;
      const visitor = (t: Tunnel | Response | undefined) => (t instanceof Tunnel && door.reaches(t) === true && t.agent ? new TlsVisitor(door, t, hello, budget, opened) : otherwise);
      const local = registry.tunnelBySubdomain(label);
      // a name of this node's is this node's to serve, whatever its kind; only an unknown one is asked of the others
      if (local || !elsewhere) return visitor(local);
      const found = elsewhere(label);
      return found instanceof Promise ? found.then(visitor) : visitor(found);
    },
  };
}

/** One visitor's connection to a tls tunnel, from its hello to its close. */
class TlsVisitor implements Passthrough {
  private visit: ConnectionVisit | undefined;

  constructor(
    private readonly door: ConnectionDoor,
    private readonly tunnel: Tunnel,
    /** Its hello: the name it asked for (`conn.tls.sni`, never absent here: route), and its JA4's pieces. */
    private readonly hello: ClientHello,
    private readonly budget: SocketBudget,
    private readonly opened?: () => void,
  ) {}

  open(socket: Socket<unknown>, firstBytes: Uint8Array): void {
    // the hello named the tunnel (route); the rest of the steps now that the connection is here
    this.visit = judgeConnection(this.door, socket, this.tunnel, (v) => {
      socket.setNoDelay(true);
      v.relay!.socketData(firstBytes); // the hello, and whatever came with it
      this.opened?.();
    }, this.hello.serverName, this.hello);
  }

  private get relay(): SocketRelay | undefined {
    return this.visit?.relay;
  }

  data(_socket: Socket<unknown>, chunk: Uint8Array): void {
    const v = this.visit;
    if (v?.relay) v.relay.socketData(chunk);
    else if (v) heldEarly(v, chunk, this.door.maxEarlyBytes);
  }

  drain(): void {
    this.relay?.socketDrain();
  }

  end(): void {
    this.relay?.socketEnd();
  }

  close(_socket: Socket<unknown>, error?: Error): void {
    if (this.visit) connectionClosed(this.visit, this.budget);
    this.relay?.socketClosed(error);
  }
}

/** The port for tls tunnels only (--tls-port): no certificates of its own, so a name that is no tls tunnel's gets unrecognized_name. */
export function listenTlsOnly(routes: TlsTunnelRoutes, where: { hostname: string; port: number; helloTimeoutMs?: number }): TlsFront<undefined> {
  return new TlsFront<undefined>({
    ...where,
    route: (hello) => routes.route(hello, "unrecognized" as const),
    socket: { open: (socket) => void socket.terminate() },
  });
}
