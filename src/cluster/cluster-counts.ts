/**
 * What is live over every node, as the rules count it and the admin API
 * lists it: the live tokens and tunnels of a user (max_devices,
 * max_tunnels), who holds a name or a private tunnel (admission), a
 * session's token, and the list of /api/tunnels/active. Each answer is
 * this node's registry and the other nodes' rows in live_tunnels (those of
 * live nodes only). Cluster (cluster.ts) answers LiveView and LiveTunnels
 * with it; it owns no state, it only reads.
 */
import type { LiveView } from "../core/admission.ts";
import type { ActiveTunnel } from "../core/live.ts";
import { privateRowName } from "../edge/private-streams.ts";
import type { ClusterSide } from "./cluster-context.ts";
import { NOW_MS } from "./db-clock.ts";
import { httpName, membersOf, ONE_ROW_A_TUNNEL, rowsOf } from "./live-rows.ts";

export class ClusterCounts implements LiveView {
  constructor(private readonly side: ClusterSide) {}

  async list(): Promise<ActiveTunnel[]> {
    const rows = await this.side.sql.unsafe(
      `SELECT t.*, p.name AS private_name, p.shares AS private_shares FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       LEFT JOIN private_names p ON t.name = 'private:' || p.owner_id || '/' || p.name
       WHERE t.node_id <> $1 AND t.session_id IS NOT NULL AND n.heartbeat_ms > ${NOW_MS} - $2 AND ${ONE_ROW_A_TUNNEL}`,
      [this.side.nodeId, this.side.expiryMs],
    );
    // a private tunnel's shares by username; its connectors are counted where they connect (this node's here)
    const privateOf = async (r: Record<string, any>): Promise<ActiveTunnel["private"]> =>
      r.private_name === null
        ? undefined
        : {
            target: `${r.username}/${r.private_name}`,
            shares: await this.side.core.privateShares.usernames(JSON.parse(r.private_shares) as number[]),
            connected: this.side.registry.connectedElsewhereCount(r.user_id, r.private_name),
          };
    const privates = await Promise.all(rows.map(privateOf));
    const others: ActiveTunnel[] = rows.map((r: Record<string, any>, i: number) => ({
      protocol: r.protocol,
      // a tunnel known by its hostname alone has it in the subdomain column (it has dots; a subdomain never)
      ...(typeof r.subdomain === "string" && r.subdomain.includes(".") ? { hostname: r.subdomain } : { subdomain: r.subdomain ?? undefined }),
      ...(r.hostname !== null ? { hostname: r.hostname } : {}),
      ...(r.pool !== null ? { pool: { inRotation: r.in_rotation } } : {}),
      port: r.port ?? undefined,
      userId: r.user_id,
      username: r.username,
      tokenId: r.token_id,
      connectedAt: new Date(r.connected_at),
      bytesIn: Number(r.bytes_in),
      bytesOut: Number(r.bytes_out),
      ...(privates[i] ? { private: privates[i] } : {}),
    }));
    return [...this.side.registry.list(), ...others];
  }

  async liveTokenIds(userId: number): Promise<Set<number>> {
    const rows = await this.side.sql.unsafe(
      `SELECT DISTINCT t.token_id FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.user_id = $1 AND t.session_id IS NOT NULL AND n.heartbeat_ms > ${NOW_MS} - $2`,
      [userId, this.side.expiryMs],
    );
    return new Set([...rows.map((r: { token_id: number }) => r.token_id), ...this.side.registry.liveTokenIds(userId)]);
  }

  async liveTunnelCount(userId: number, except?: string): Promise<number> {
    const rows = await this.side.sql.unsafe(
      `SELECT count(*)::int AS n FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.user_id = $1 AND t.session_id IS NOT NULL AND t.session_id IS DISTINCT FROM $2 AND n.heartbeat_ms > ${NOW_MS} - $3 AND ${ONE_ROW_A_TUNNEL}`,
      [userId, except ?? null, this.side.expiryMs],
    );
    return rows[0]?.n ?? 0;
  }

  /** This node's only: the others' reach the database within SYNC_MS (cluster.ts) of being counted. */
  unflushedBytes(userId: number): number {
    return this.side.registry.unflushedBytes(userId);
  }

  async subdomainHolder(subdomain: string): Promise<{ tokenId: number; sessionId: string | null; pool?: { userId: number } } | undefined> {
    const here = this.side.registry.subdomainHolder(subdomain);
    if (here) return here;
    // a pool's name is held while a member is live, on any node (this one's are in its registry)
    const rows = await this.side.sql.unsafe(
      `SELECT t.token_id, t.session_id, t.pool, t.user_id FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.name = $1 AND n.heartbeat_ms > ${NOW_MS} - $3::bigint
         AND CASE WHEN t.pool IS NULL THEN t.node_id <> $2 ELSE EXISTS (${membersOf("$4", "$3::bigint")}) END`,
      [httpName(subdomain), this.side.nodeId, this.side.expiryMs, subdomain],
    );
    const r = rows[0];
    // a pool's name is in no grace, whichever token last joined it: only a pool of its user may take it
    if (r?.pool) return { tokenId: r.token_id, sessionId: "pool", pool: { userId: r.user_id } };
    return r && { tokenId: r.token_id, sessionId: r.session_id };
  }

  async userTunnels(userId: number): Promise<{ key: string; here?: string; tokenId: number; since: number }[]> {
    const rows = await this.side.sql.unsafe(
      `SELECT t.name, t.node_id, t.token_id, t.connected_at FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.user_id = $1 AND t.session_id IS NOT NULL AND n.heartbeat_ms > ${NOW_MS} - $2 AND ${ONE_ROW_A_TUNNEL}`,
      [userId, this.side.expiryMs],
    );
    // this node's rows by the tunnel each is the row of
    const mine = new Map<string, string>();
    for (const { tunnels } of this.side.registry.liveSessions()) for (const t of tunnels) if (t.userId === userId) mine.set(rowsOf(t, this.side.nodeId)[0]!, t.id);
    return rows.map((r: Record<string, any>) => ({
      key: r.name,
      ...(r.node_id === this.side.nodeId && mine.has(r.name) ? { here: mine.get(r.name) } : {}),
      tokenId: r.token_id,
      since: Date.parse(r.connected_at),
    }));
  }

  async privateHolder(ownerId: number, name: string): Promise<{ tokenId: number; sessionId: string | null } | undefined> {
    const here = this.side.registry.privateHolder(ownerId, name);
    if (here) return here;
    const rows = await this.side.sql.unsafe(
      `SELECT t.token_id, t.session_id FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.name = $1 AND t.node_id <> $2 AND n.heartbeat_ms > ${NOW_MS} - $3::bigint`,
      [privateRowName(ownerId, name), this.side.nodeId, this.side.expiryMs],
    );
    const r = rows[0];
    return r && { tokenId: r.token_id, sessionId: r.session_id };
  }

  async sessionTokenId(sessionId: string): Promise<number | undefined> {
    const here = this.side.registry.sessionTokenId(sessionId);
    if (here !== undefined) return here;
    const rows = await this.side.sql`SELECT token_id FROM live_tunnels WHERE session_id = ${sessionId} LIMIT 1`;
    return rows[0]?.token_id;
  }
}
