/**
 * Pools: several agents of one user behind one name (or tcp port). Each
 * member is a tunnel of its own (its agent, its counters, its access
 * rules); the pool is what they share: the name, and which member the next
 * request (http) or connection (tcp) goes to. A member is in rotation while
 * its agent is connected and it has not taken itself out (a failing health
 * check, a rolling restart: agent/health.ts). The name stays while any
 * member is there, in grace included.
 *
 * `round-robin` takes the members in turn; `least-requests` the one with
 * the fewest requests (or connections) in flight, in turn among equals.
 */
import type { PoolBalance } from "../core/admission.ts";

/** What the pool reads and sets of a member (registry.ts's Tunnel): kept structural so the two files do not import each other. */
export interface PoolMember {
  agent: unknown;
  inRotation: boolean;
  inFlight: number;
  pool?: TunnelPool<any>;
}

export class TunnelPool<Tunnel extends PoolMember = PoolMember> {
  readonly members: Tunnel[] = [];
  private turn = 0;
  /** Set by whoever holds a resource for the whole pool (a tcp pool's listener): called when the last member goes. */
  onEmpty?: () => void;

  constructor(
    readonly balance: PoolBalance,
    readonly userId: number,
  ) {}

  add(t: Tunnel): void {
    if (!this.members.includes(t)) this.members.push(t);
    t.pool = this;
  }

  /** Takes `t` out; true when it was the last. */
  remove(t: Tunnel): boolean {
    const i = this.members.indexOf(t);
    if (i >= 0) this.members.splice(i, 1);
    if (this.members.length > 0) return false;
    this.onEmpty?.();
    return true;
  }

  /**
   * The member the next request or connection goes to; undefined when none
   * is in rotation. `others`: members of the pool on other nodes, reached
   * through a relay (stand-ins, cluster/remote-tunnels.ts), taken in turn
   * with this node's own.
   */
  pick(others?: readonly Tunnel[]): Tunnel | undefined {
    const local = this.members.length;
    const n = local + (others?.length ?? 0);
    let best: Tunnel | undefined;
    let bestAt = 0;
    for (let k = 0; k < n; k++) {
      const at = (this.turn + k) % n;
      const t = at < local ? this.members[at]! : others![at - local]!;
      if (!t.agent || !t.inRotation) continue;
      if (this.balance === "round-robin") {
        this.turn = (at + 1) % n;
        return t;
      }
      if (!best || t.inFlight < best.inFlight) {
        best = t;
        bestAt = at;
      }
    }
    if (best) this.turn = (bestAt + 1) % n;
    return best;
  }

  /** Members in rotation now. */
  get inRotation(): number {
    return this.members.filter((t) => t.agent && t.inRotation).length;
  }
}
