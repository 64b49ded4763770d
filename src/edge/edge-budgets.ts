/**
 * What the edge lets in at once: visitor connections per client address
 * and in all (the public port's and TCP tunnels' together), agents'
 * connections per address, and the open-file limit behind them. When
 * descriptors run short, what is idle goes first, then nothing new is
 * taken on the public (and redirect) port until enough are free again.
 */
import { log } from "../log.ts";
import { defaultMaxConns, DescriptorWatch, logDescriptorBudget, openFileLimit } from "../os/descriptors.ts";
import { SocketBudget } from "../sockets/socket-budget.ts";
import type { PublicListener } from "./public-listener.ts";
import type { PublicPort } from "./public-port.ts";
import { overLimit } from "./visitor-requests.ts";

export class EdgeBudgets {
  /** Descriptors nearly exhausted: nothing new is taken until enough are free again (watch()). */
  pressed = false;
  readonly fdLimit = openFileLimit();
  readonly maxConns: number;
  /** TCP and tls tunnels' visitors: they share the total with the public port's. */
  readonly tcpVisitors: SocketBudget;
  /**
   * The public port's per-client counts (a trusted proxy's clients apart),
   * from each connection's first request; its total is kept at accept
   * (admitOpen), where silent connections count too.
   */
  readonly visitors: SocketBudget;
  /** Agents' connections (WebSocket and direct): a per-address cap of their own, higher: a team behind one NAT is many agents. */
  readonly agents: SocketBudget;

  constructor(private readonly opts: { maxConns?: number; maxConnsPerIp: number; maxAgentsPerIp: number }) {
    this.maxConns = opts.maxConns ?? defaultMaxConns(this.fdLimit);
    this.tcpVisitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: this.maxConns }, () => this.visitors.total, () => this.pressed);
    this.visitors = new SocketBudget({ perAddress: opts.maxConnsPerIp, total: this.maxConns }, () => this.tcpVisitors.total, () => this.pressed);
    this.agents = new SocketBudget({ perAddress: opts.maxAgentsPerIp, total: Number.MAX_SAFE_INTEGER }, undefined, () => this.pressed);
  }

  /** A place for an agent's connection from an address, on the public or the direct port, or the SSH gateway's. */
  admitAgent(port: "public" | "direct" | "ssh"): (address: string) => boolean {
    return (address) => {
      const ok = this.agents.admit(address);
      if (!ok) overLimit("agent connection refused", { client: address, port });
      return ok;
    };
  }

  /** A connection to the public port, `open` there already: every open one holds a descriptor, requests or not. */
  admitOpen(open: number): boolean {
    if (!this.pressed && open + this.tcpVisitors.total < this.maxConns) return true;
    overLimit("visitor connection refused", { limit: this.pressed ? "open files" : "max-conns" });
    return false;
  }

  /** Logs the budget and watches the descriptors in use, shedding and pausing the listeners when they run short. */
  watch(edge: { listener: PublicPort; redirect?: PublicListener<undefined> }): DescriptorWatch {
    const { fdLimit } = this;
    logDescriptorBudget(fdLimit, this.maxConns, this.opts.maxConnsPerIp);
    const { listener, redirect } = edge;
    const watch = new DescriptorWatch(fdLimit, (nowPressed, inUse) => {
      this.pressed = nowPressed;
      if (nowPressed) {
        const shed = listener.closeIdle() + (redirect?.closeIdle() ?? 0);
        listener.pause();
        redirect?.pause();
        log.warn("open files nearly exhausted: closed idle visitor connections and stopped accepting new ones", { in_use: inUse, limit: fdLimit, closed: shed });
      } else {
        const resumed = listener.resume();
        redirect?.resume();
        log.info(resumed ? "open files available again: accepting visitors" : "open files available again, but the public port could not be listened on again", { in_use: inUse, limit: fdLimit, err: listener.listenError });
      }
    });
    watch.start();
    return watch;
  }
}
