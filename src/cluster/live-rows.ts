/**
 * How this node's tunnels are written in live_tunnels, the table every node
 * reads: the name of each row (one over the cluster for a name, a private
 * tunnel or a pool member; a port's is its node's own) and the conditions
 * the cluster's queries share, so that every query names a row the same
 * way. No query runs here.
 */
import { privateRowName } from "../edge/private-streams.ts";
import { kindFacts } from "../protocol/kinds.ts";
import type { Tunnel } from "../edge/registry.ts";
import { NOW_MS } from "./db-clock.ts";

/** A name's row: a subdomain's, or a custom hostname's (it has dots), which a tunnel with both claims beside its subdomain's. */
export const httpName = (subdomain: string) => `http:${subdomain}`;
/** Rows that are tunnels, not a tunnel's second name: a twin row (a hostname beside a subdomain) has no subdomain column, nor has a pool's name's. */
export const ONE_ROW_A_TUNNEL = "NOT (t.name LIKE 'http:%' AND t.subdomain IS NULL)";
/** A pool member's row: by its tunnel's id, one over the cluster (the agent's own id for it). */
export const memberRow = (tunnelId: string) => `member:${tunnelId}`;
/**
 * The live members, on any node, of the pool named by the SQL parameter
 * `name` (its first name, or its hostname beside a subdomain); `expiry` the
 * parameter of the node expiry. `also`: a further condition on m.
 */
export const membersOf = (name: string, expiry: string, also = "TRUE") =>
  `SELECT 1 FROM live_tunnels m JOIN cluster_nodes mn ON mn.id = m.node_id
   WHERE m.pool IS NOT NULL AND starts_with(m.name, 'member:') AND (m.subdomain = ${name} OR m.hostname = ${name})
     AND mn.heartbeat_ms > ${NOW_MS} - ${expiry} AND ${also}`;

/** A tunnel's rows: a pool member's own; else its name's, and its custom hostname's beside it when it has one. */
export function rowsOf(t: Pick<Tunnel, "id" | "protocol" | "subdomain" | "hostname" | "port" | "pool" | "userId" | "privateName">, nodeId: string): string[] {
  if (t.pool) return [memberRow(t.id)];
  return t.hostname === undefined || t.subdomain === undefined ? [nameOf(t, nodeId)] : [nameOf(t, nodeId), httpName(t.hostname)];
}

/**
 * A tunnel's row: its name (one over the cluster), its port on this node
 * ("tcp:" and "udp:" apart, two port spaces), or a private tunnel's owner
 * and name (one over the cluster too).
 */
export function nameOf(t: Pick<Tunnel, "protocol" | "subdomain" | "hostname" | "port" | "userId" | "privateName">, nodeId: string): string {
  if (t.privateName !== undefined) return privateRowName(t.userId, t.privateName);
  const name = t.subdomain ?? t.hostname;
  return name !== undefined ? httpName(name) : `${kindFacts(t.protocol).portSpace ?? "tcp"}:${nodeId}:${t.port}`;
}

/** An http tunnel's names, its first (the subdomain, or a hostname alone) first. */
export function namesOfTunnel(t: Pick<Tunnel, "subdomain" | "hostname">): string[] {
  return [t.subdomain, t.hostname].filter((n): n is string => n !== undefined);
}
