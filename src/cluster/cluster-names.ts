/**
 * The names over the cluster, each one tunnel's on every node: a subdomain
 * or a custom hostname claimed atomically (one INSERT .. ON CONFLICT on its
 * row: of two agents asking two nodes for one name, one wins), held at
 * start for the agent of the last run, given back when no tunnel took it;
 * a tcp, udp or private tunnel's row written (nothing to contend for); and
 * what the other nodes hold under a name, for the relay to reach it. Its
 * state is the rows in live_tunnels (their names: live-rows.ts); a pool's
 * names are cluster-pools.ts's.
 */
import type { PoolBalance } from "../core/admission.ts";
import { privateRowName } from "../edge/private-streams.ts";
import { log } from "../log.ts";
import { namedKindOf, type PrivateKind } from "../protocol/kinds.ts";
import type { NameOwner, Serving } from "../edge/other-nodes.ts";
import type { Tunnel } from "../edge/registry.ts";
import type { ClusterSide } from "./cluster-context.ts";
import { NOW_MS } from "./db-clock.ts";
import { httpName, membersOf, rowsOf } from "./live-rows.ts";

/** A tunnel of another node, as a visitor's node needs it to relay. */
export interface RemoteTunnel extends Serving {
  nodeId: string;
  nodeUrl: string | null;
  subdomain: string;
  userId: number;
  username: string;
  tokenId: number;
}

/** What the cluster holds under a name: another node's tunnel, or a pool and its members on other nodes in rotation (`row`: each member's). */
export type RemoteName = { tunnel: RemoteTunnel } | { pool: { balance: PoolBalance; userId: number; members: (RemoteTunnel & { row: string })[] } };

export class ClusterNames {
  constructor(private readonly side: ClusterSide) {}

  /**
   * Takes `subdomain` for this node's session, atomically over the cluster:
   * true when it is ours now. It is taken when free, held by a dead node, or
   * held by the same token in grace or in the session being resumed (on any
   * node). A node's rows from an earlier life went at its start.
   */
  async claim(subdomain: string, owner: NameOwner, sessionId: string, resume: string | undefined, serving: Serving): Promise<boolean> {
    const won = await this.claimName(subdomain, owner, sessionId, resume, serving);
    if (won) await this.side.notify({ kind: "taken", name: httpName(subdomain), sessionId });
    return won;
  }

  /** A claim the other nodes are not told of: a name held at start, or claimed again by a node that was taken for dead. */
  async claimName(
    subdomain: string,
    owner: NameOwner,
    sessionId: string | null,
    resume: string | undefined,
    serving: Serving,
  ): Promise<boolean> {
    // not while a pool's member is live anywhere (its name's own row may have gone with a dead node);
    // a pool's name whose members are all gone is free (its row is left over)
    const rows = await this.side.sql.unsafe(
      `INSERT INTO live_tunnels AS t (name, protocol, subdomain, hostname, node_id, session_id, user_id, username, token_id, connected_at, skip_warning, response_timeout_ms)
       SELECT $1, $13, $2, $14, $3, $4, $5::int, $6, $7::int, $8, $11::boolean, $12::int
       WHERE NOT EXISTS (${membersOf("$15", "$9::bigint")})
       ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, protocol = excluded.protocol, subdomain = excluded.subdomain, hostname = excluded.hostname,
         session_id = excluded.session_id, user_id = excluded.user_id, username = excluded.username, token_id = excluded.token_id, connected_at = excluded.connected_at,
         bytes_in = 0, bytes_out = 0, skip_warning = excluded.skip_warning, response_timeout_ms = excluded.response_timeout_ms, pool = NULL, in_rotation = TRUE
       WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.id = t.node_id AND n.heartbeat_ms > ${NOW_MS} - $9::bigint)
          OR t.pool IS NOT NULL
          OR (t.token_id = excluded.token_id AND t.protocol = excluded.protocol AND (t.session_id IS NULL OR t.session_id = $10))
       RETURNING name`,
      [
        httpName(subdomain),
        // a twin row (a tunnel's hostname beside its subdomain) names no tunnel of its own: no subdomain column
        serving.twin ? null : subdomain,
        this.side.nodeId,
        sessionId,
        owner.userId,
        owner.username,
        owner.tokenId,
        new Date().toISOString(),
        this.side.expiryMs,
        resume ?? null,
        serving.skipWarning,
        serving.responseTimeoutMs ?? null,
        serving.protocol ?? "http",
        serving.twin ? null : (serving.hostname ?? null),
        subdomain,
      ],
    );
    return rows.length > 0;
  }

  /** A tcp or udp tunnel's row (its port is this node's own: nothing to contend for), or a pool member's. */
  async registerRow(
    t: Pick<Tunnel, "id" | "protocol" | "subdomain" | "hostname" | "port" | "userId" | "username" | "tokenId" | "pool" | "inRotation" | "skipWarning" | "responseTimeoutMs" | "privateName">,
    sessionId: string | null,
  ): Promise<boolean> {
    await this.side.sql.unsafe(
      `INSERT INTO live_tunnels (name, protocol, port, subdomain, hostname, node_id, session_id, user_id, username, token_id, connected_at, pool, in_rotation, skip_warning, response_timeout_ms)
       VALUES ($1, $9, $2, $10, $11, $3, $4, $5, $6, $7, $8, $12, $13, $14, $15)
       ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, user_id = excluded.user_id, username = excluded.username,
         token_id = excluded.token_id, connected_at = excluded.connected_at, bytes_in = 0, bytes_out = 0, in_rotation = excluded.in_rotation`,
      [
        rowsOf(t, this.side.nodeId)[0],
        t.port ?? null,
        this.side.nodeId,
        sessionId,
        t.userId,
        t.username,
        t.tokenId,
        new Date().toISOString(),
        t.protocol,
        t.port === undefined ? (t.subdomain ?? t.hostname ?? null) : null,
        t.port === undefined && t.subdomain !== undefined ? (t.hostname ?? null) : null,
        t.pool?.balance ?? null,
        t.inRotation,
        t.skipWarning,
        t.responseTimeoutMs ?? null,
      ],
    );
    // its connectors on other nodes: still shared with? (its owner may have changed the list)
    if (t.privateName !== undefined) await this.side.notify({ kind: "private", ownerId: t.userId, name: t.privateName });
    return true;
  }

  /** Another node's live private tunnel `owner/name`, to reach through a relay link; undefined when none has it. */
  async privateElsewhere(ownerId: number, name: string): Promise<Omit<RemoteTunnel, keyof Serving> & { protocol: PrivateKind } | undefined> {
    const rows = await this.side.sql.unsafe(
      `SELECT t.node_id, n.url, t.protocol, t.user_id, t.username, t.token_id FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE t.name = $1 AND t.node_id <> $2 AND t.session_id IS NOT NULL AND n.heartbeat_ms > ${NOW_MS} - $3::bigint`,
      [privateRowName(ownerId, name), this.side.nodeId, this.side.expiryMs],
    );
    const r = rows[0];
    return r && { nodeId: r.node_id, nodeUrl: r.url, subdomain: privateRowName(ownerId, name), userId: r.user_id, username: r.username, tokenId: r.token_id, protocol: r.protocol };
  }

  /**
   * A name this node holds at start for the agent of its last run (the
   * restart holds): claimed in grace for its token, as if its agent had just
   * dropped; let go when another node has it.
   */
  holdAtStart(t: Tunnel): Promise<void> {
    // a pool's members join it again at their handshakes; until then the name is held here only
    if (t.pool || (t.subdomain === undefined && t.hostname === undefined)) return Promise.resolve();
    const serving = { skipWarning: t.skipWarning, protocol: namedKindOf(t.protocol) };
    const claimed =
      t.subdomain !== undefined
        ? this.claimName(t.subdomain, t, null, undefined, { ...serving, hostname: t.hostname }).then(
            async (ok) => ok && (t.hostname === undefined || (await this.claimName(t.hostname, t, null, undefined, { ...serving, twin: true }))),
          )
        : this.claimName(t.hostname!, t, null, undefined, serving);
    return claimed.then(
      (ok) => {
        if (!ok && !t.agent) this.side.registry.remove(t);
      },
      (err) => log.warn("cluster hold not written", { err: String(err) }),
    );
  }

  /** Gives back a claimed name that no tunnel of this node took after all. */
  async release(subdomain: string): Promise<void> {
    if (this.side.registry.tunnelBySubdomain(subdomain)) return;
    await this.side.quietly("release", this.side.sql`DELETE FROM live_tunnels WHERE name = ${httpName(subdomain)} AND node_id = ${this.side.nodeId}`);
  }

  /**
   * What other nodes hold under `name`: a live tunnel of another node, or a
   * pool (its name's row on any node, or members) with its members of other
   * nodes that are in rotation; undefined when neither.
   */
  async remote(name: string): Promise<RemoteName | undefined> {
    const rows = await this.side.sql.unsafe(
      `SELECT t.name, t.node_id, n.url, t.protocol, t.user_id, t.username, t.token_id, t.skip_warning, t.response_timeout_ms, t.pool, t.in_rotation, t.session_id
       FROM live_tunnels t JOIN cluster_nodes n ON n.id = t.node_id
       WHERE n.heartbeat_ms > ${NOW_MS} - $3::bigint
         AND ((t.name = $1 AND (t.pool IS NOT NULL OR (t.node_id <> $2 AND t.session_id IS NOT NULL)))
           OR (t.pool IS NOT NULL AND starts_with(t.name, 'member:') AND (t.subdomain = $4 OR t.hostname = $4)))`,
      [httpName(name), this.side.nodeId, this.side.expiryMs, name],
    );
    const standIn = (r: Record<string, any>): RemoteTunnel => ({
      nodeId: r.node_id,
      nodeUrl: r.url,
      subdomain: name,
      userId: r.user_id,
      username: r.username,
      tokenId: r.token_id,
      skipWarning: r.skip_warning,
      responseTimeoutMs: r.response_timeout_ms ?? undefined,
      protocol: namedKindOf(r.protocol),
    });
    const pooled = rows.filter((r: Record<string, any>) => r.pool !== null);
    if (pooled.length === 0) return rows[0] && { tunnel: standIn(rows[0]) };
    const members = pooled.filter((r: Record<string, any>) => r.name !== httpName(name) && r.node_id !== this.side.nodeId && r.session_id !== null && r.in_rotation);
    return { pool: { balance: pooled[0].pool, userId: pooled[0].user_id, members: members.map((r: Record<string, any>) => ({ ...standIn(r), row: r.name })) } };
  }
}
