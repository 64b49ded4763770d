/**
 * `conn.server_region`: the region this node was given (--region), one
 * per process as a node has one; set once when the edge starts. A visit
 * relayed from another node carries that node's (RelayedMeta.region): the
 * region is where the visitor came in, not where the rules ran.
 */

import type { RelayedMeta } from "../../protocol/messages.ts";

let region = "";

/** What --region says (the empty string: none). */
export function setNodeRegion(name: string): void {
  region = name;
}

export function nodeRegion(): string {
  return region;
}

/**
 * What a request relayed to another node carries of its visitor's
 * connection: this node's region, and the connection's counts at the
 * moment it is relayed (a snapshot: the rules there read them as they
 * were then).
 */
export function relayedConnection(meta: RelayedMeta, conn: { readonly bytesIn: number; readonly bytesOut: number }): void {
  if (region !== "") meta.region = region;
  meta.bytesIn = conn.bytesIn;
  meta.bytesOut = conn.bytesOut;
}
