/**
 * A connection budget, per address and in all. The edge keeps three
 * (edge/server.ts): the public port's visitors (a place taken with a
 * connection's first request, edge/visitor-requests.ts), the raw
 * connections of tcp and tls tunnels, and agents' connections
 * (--max-agents-per-ip); the DNS responder one for its TCP queries.
 * Bun.listen shows every connection as it opens and closes, so here the
 * count is exact: a connection over its address's cap, over the total, or
 * arriving while descriptors are short is closed at once, which frees its
 * descriptor before it costs anything else.
 */
export interface SocketLimits {
  perAddress: number;
  /** Connections in all, this budget's and others' (e.g. the public HTTP port's) together. */
  total: number;
}

export class SocketBudget {
  private readonly perAddress = new Map<string, number>();
  private open = 0;

  constructor(
    private readonly limits: SocketLimits,
    /** Connections counted elsewhere against the same total. */
    private readonly elsewhere: () => number = () => 0,
    /** True while descriptors are short: nothing new is taken. */
    private readonly pressed: () => boolean = () => false,
  ) {}

  get total(): number {
    return this.open;
  }

  /** Connections counted for `address`. */
  count(address: string): number {
    return this.perAddress.get(address) ?? 0;
  }

  /** Why a new connection from `address` would be refused now, or undefined when it has a place. */
  refusal(address: string): "address" | "total" | "pressed" | undefined {
    if (this.pressed()) return "pressed";
    if (this.count(address) >= this.limits.perAddress) return "address";
    if (this.open + this.elsewhere() >= this.limits.total) return "total";
    return undefined;
  }

  /** Counts a connection from `address`, whatever the limits (refusal() decides before). */
  take(address: string): void {
    this.perAddress.set(address, this.count(address) + 1);
    this.open++;
  }

  /** Takes a place for a connection from `address`; false: close it now (and do not release). */
  admit(address: string): boolean {
    if (this.refusal(address) !== undefined) return false;
    this.take(address);
    return true;
  }

  release(address: string): void {
    const n = this.perAddress.get(address);
    if (n === undefined) return;
    if (n <= 1) this.perAddress.delete(address);
    else this.perAddress.set(address, n - 1);
    this.open--;
  }
}
