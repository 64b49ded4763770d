/**
 * What the edge's udp tunnels count for the metrics: datagrams each way,
 * those dropped by why, and flows. Plain numbers added to on the hot path;
 * the registry reads them at scrape time.
 */

/**
 * Why a visitor's datagram (or a reply to one) was dropped: the tunnel's IP
 * rules, the rate per source, no agent to take it (reconnecting, or out of
 * streams), the agent's link congested, or the reply not sent (the
 * server's socket buffer full).
 */
export const UDP_DROPS = ["rules", "rate", "no_agent", "congested", "unsent"] as const;
export type UdpDrop = (typeof UDP_DROPS)[number];

export class UdpCounters {
  datagramsIn = 0;
  datagramsOut = 0;
  readonly dropped = new Float64Array(UDP_DROPS.length);
  flowsOpen = 0;
  flowsOpened = 0;

  drop(why: UdpDrop): void {
    this.dropped[UDP_DROPS.indexOf(why)]!++;
  }
}
