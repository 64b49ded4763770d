/**
 * One network's share of a cap that all share: what each network (an IPv4
 * address, an IPv6 /64: http/addresses.ts clientKey) holds now, each piece
 * until it expires or is given back. The device login's codes waiting for
 * approval: one network cannot fill the table every device asks into and
 * starve the others. Kept per node, in memory; bounded by `share` pieces a
 * network and `maxNetworks` networks.
 */

export class NetworkShares {
  /** network -> piece -> when it expires (ms). */
  private readonly held = new Map<string, Map<string, number>>();

  constructor(
    /** Pieces one network may hold at once. */
    readonly share: number,
    private readonly maxNetworks: number,
    private readonly now: () => number = Date.now,
  ) {}

  /** Takes a piece for `network` until `expiresAt`; false when it holds its share already (or too many networks hold some). */
  take(network: string, piece: string, expiresAt: number): boolean {
    const pieces = this.held.get(network) ?? new Map<string, number>();
    this.prune(network, pieces);
    if (pieces.size >= this.share) return false;
    if (pieces.size === 0) {
      if (this.held.size >= this.maxNetworks) this.sweep();
      if (this.held.size >= this.maxNetworks) return false;
      this.held.set(network, pieces);
    }
    pieces.set(piece, expiresAt);
    return true;
  }

  /** Gives a piece back before it expires (the code was used, or denied). */
  giveBack(network: string, piece: string): void {
    const pieces = this.held.get(network);
    if (!pieces) return;
    pieces.delete(piece);
    if (pieces.size === 0) this.held.delete(network);
  }

  /** Pieces `network` holds now. */
  holds(network: string): number {
    const pieces = this.held.get(network);
    return pieces ? this.prune(network, pieces) : 0;
  }

  /** Drops every expired piece, and the networks left with none. */
  sweep(): void {
    for (const [network, pieces] of this.held) this.prune(network, pieces);
  }

  private prune(network: string, pieces: Map<string, number>): number {
    const t = this.now();
    for (const [piece, expiresAt] of pieces) if (expiresAt <= t) pieces.delete(piece);
    if (pieces.size === 0) this.held.delete(network);
    return pieces.size;
  }
}
