/**
 * The public port's connection budget: at most --max-conns-per-ip
 * connections per client address and --max-conns in all. Bun.serve shows a
 * connection only through its requests (the peer's address and port), so a
 * connection is counted from its first request until it is known closed:
 * idle past --idle-timeout (Bun closed it), shed by closeIdle(), said
 * gone by the kernel (os/kernel-sockets.ts, asked before anyone is refused),
 * or answered with `Connection: close`. A connection over budget gets a
 * quick 503 and is closed; the ones already counted go on.
 */
import { canonicalAddress } from "../http/addresses.ts";
import { establishedPeers } from "../os/kernel-sockets.ts";
import { SocketBudget } from "../sockets/socket-budget.ts";

/**
 * The kernel is asked at most every 50 ms, and never more than a tenth of
 * the time: reading /proc/net/tcp costs a few milliseconds (the kernel walks
 * its whole socket hash) up to tens of
 * milliseconds on a host with tens of thousands of sockets (TIME_WAIT ones
 * included, which anyone can pile up), and an attacker at its cap must not
 * make every refusal cost that. So a client is refused wrongly only if it
 * opens more than its cap of connections between two reads.
 */
const RECONCILE_MIN_INTERVAL_MS = 50;
const RECONCILE_MAX_SHARE = 1 / 10;

interface Connection {
  /** Who it counts for: the peer, or the client a trusted proxy named. */
  client: string;
  inFlight: number;
  /** When its last response ended; idle connections expire from here. */
  idleSince: number;
}

export type Admission = { ok: true; key: string } | { ok: false; why: "address" | "total" };

export class VisitorConnections {
  /** By socket ("address:port" of the peer). */
  private readonly bySocket = new Map<string, Connection>();
  /** The counts per client and in all (the same arithmetic as the TCP listeners' budget). */
  private readonly counts: SocketBudget;
  /** When the kernel may be asked again. */
  private nextReconcile = 0;

  constructor(
    readonly limits: { perAddress: number; total: number; idleTimeoutS: number },
    private readonly localPort: () => number,
    /** Connections counted elsewhere against the same total (TCP tunnels' visitors). */
    elsewhere: () => number = () => 0,
    private readonly now: () => number = Date.now,
    private readonly kernelPeers: (port: number) => Set<string> | undefined = (port) => establishedPeers(port),
  ) {
    this.counts = new SocketBudget(limits, elsewhere);
  }

  get total(): number {
    return this.bySocket.size;
  }

  countFor(client: string): number {
    return this.counts.count(client);
  }

  /** A request arrived on the socket `peer`; is its connection within budget? */
  begin(peerAddress: string, peerPort: number, client: string): Admission {
    const key = `${canonicalAddress(peerAddress)}:${peerPort}`;
    const known = this.bySocket.get(key);
    if (known) {
      known.inFlight++;
      return { ok: true, key };
    }
    let over = this.overBudget(client);
    if (over) {
      this.reconcile();
      over = this.overBudget(client);
    }
    if (over) return { ok: false, why: over };
    this.bySocket.set(key, { client, inFlight: 1, idleSince: 0 });
    this.counts.take(client);
    return { ok: true, key };
  }

  /** The response on `key` ended; `closing` when the connection closes with it. */
  end(key: string, closing = false): void {
    const c = this.bySocket.get(key);
    if (!c) return;
    c.inFlight = Math.max(0, c.inFlight - 1);
    c.idleSince = this.now();
    if (closing && c.inFlight === 0) this.forget(key, c);
  }

  /** Every connection without a request in flight was closed (Bun's closeIdleConnections). */
  closedIdle(): void {
    for (const [key, c] of this.bySocket) if (c.inFlight === 0) this.forget(key, c);
  }

  /** Drops connections idle past the idle timeout: Bun has closed them. */
  expire(): void {
    const cutoff = this.now() - (this.limits.idleTimeoutS + 1) * 1000;
    for (const [key, c] of this.bySocket) if (c.inFlight === 0 && c.idleSince < cutoff) this.forget(key, c);
  }

  private overBudget(client: string): "address" | "total" | undefined {
    return this.counts.refusal(client) as "address" | "total" | undefined; // no pressure given: never "pressed"
  }

  /** Forgets connections the kernel no longer has open (closed by the client, say). */
  private reconcile(): void {
    if (this.now() < this.nextReconcile) return;
    const started = performance.now();
    const open = this.kernelPeers(this.localPort());
    const took = performance.now() - started;
    this.nextReconcile = this.now() + Math.max(RECONCILE_MIN_INTERVAL_MS, took / RECONCILE_MAX_SHARE);
    if (!open) return;
    const canonical = new Set([...open].map((p) => {
      const i = p.lastIndexOf(":");
      return `${canonicalAddress(p.slice(0, i))}:${p.slice(i + 1)}`;
    }));
    for (const [key, c] of this.bySocket) if (!canonical.has(key)) this.forget(key, c);
  }

  private forget(key: string, c: Connection): void {
    this.bySocket.delete(key);
    this.counts.release(c.client);
  }
}
