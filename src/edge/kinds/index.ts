/**
 * The edge's part of the kind table (protocol/kinds.ts holds the facts,
 * agent/kinds the agent's part): one unit per kind, each in its own file.
 * `satisfies` makes a kind added to the protocol table without its edge
 * unit a type error here.
 */
import type { TunnelKind } from "../../protocol/kinds.ts";
import type { EdgeKind } from "./edge-kind.ts";
import { httpKind } from "./http.ts";
import { tcpKind } from "./tcp.ts";
import { tlsKind } from "./tls.ts";
import { udpKind } from "./udp.ts";

export const EDGE_KINDS = { http: httpKind, tcp: tcpKind, tls: tlsKind, udp: udpKind } as const satisfies { [K in TunnelKind]: EdgeKind<K> };

/** `kind`'s edge unit, typed for that kind (a lookup by a union of kinds cannot say so by itself). */
export function edgeKind<K extends TunnelKind>(kind: K): EdgeKind<K> {
  return EDGE_KINDS[kind] as unknown as EdgeKind<K>;
}
