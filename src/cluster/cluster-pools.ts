/**
 * The pools over the cluster (edge/pool.ts is a pool on one node): a pool
 * holds its names by rows of its own, with no tunnel, and each member has
 * a row "member:<tunnel id>" on its node. Here the user's agents on any
 * node join a pool, and a member leaves it or goes in and out of rotation;
 * a name is held while a member is live anywhere, and freed with the last.
 * Joins and frees of a name take its lock (lockPoolNames), so that no two
 * nodes decide on one name at once. What it owns: each member's rotation
 * writes, kept in order.
 */
import type { SQL } from "bun";
import type { PoolBalance } from "../core/admission.ts";
import type { NameOwner, Serving } from "../edge/other-nodes.ts";
import type { Tunnel } from "../edge/registry.ts";
import type { ClusterSide } from "./cluster-context.ts";
import { NOW_MS } from "./db-clock.ts";
import { httpName, memberRow, membersOf, namesOfTunnel } from "./live-rows.ts";

/** pg_advisory_xact_lock's first key for a pool's name, taken to join the pool or free its name: "pool" in ASCII. */
const POOL_NAME_LOCKS = 0x706f6f6c;
/** Takes a pool's names' locks for the transaction, in one order everywhere (no two nodes wait on each other). */
async function lockPoolNames(tx: SQL, names: string[]): Promise<void> {
  for (const name of [...names].sort()) await tx`SELECT pg_advisory_xact_lock(${POOL_NAME_LOCKS}::int, hashtext(${name}))`;
}

/** A join that lost a name: the transaction is rolled back, and the name said. */
class NameLost {
  constructor(readonly name: string) {}
}

export class ClusterPools {
  /** Each member's rotation writes, one after the other: in then out at once (READY, then an unhealthy agent's ROTATION) must end out. */
  private readonly rotations = new Map<string, Promise<void>>();

  constructor(private readonly side: ClusterSide) {}

  /**
   * Joins (or starts) the user's pool on `names` (a subdomain, a hostname, or
   * both) with the member `memberId` of this node's session: every name is
   * held for the pool, and the member's row is written, in one transaction
   * under the names' locks, so that the last member's leaving elsewhere
   * cannot free a name between the two. A name held by another user's
   * tunnel or pool, or by a tunnel that is no pool, is lost: its name is
   * returned, and nothing is written.
   */
  async joinPool(names: string[], memberId: string, owner: NameOwner, sessionId: string | null, serving: Serving & { pool: PoolBalance }): Promise<string | undefined> {
    const now = new Date().toISOString();
    try {
      await this.side.sql.begin(async (tx) => {
        await lockPoolNames(tx, names);
        for (const name of names) {
          const rows = await tx.unsafe(
            `INSERT INTO live_tunnels AS t (name, protocol, node_id, user_id, username, token_id, connected_at, pool)
             SELECT $1, 'http', $2, $3::int, $4, $5::int, $6, $7
             WHERE NOT EXISTS (${membersOf("$8", "$9::bigint", "m.user_id <> $3::int")})
             ON CONFLICT (name) DO UPDATE SET node_id = excluded.node_id, protocol = 'http', subdomain = NULL, hostname = NULL, session_id = NULL,
               user_id = excluded.user_id, username = excluded.username, token_id = excluded.token_id, connected_at = excluded.connected_at, pool = excluded.pool
             WHERE NOT EXISTS (SELECT 1 FROM cluster_nodes n WHERE n.id = t.node_id AND n.heartbeat_ms > ${NOW_MS} - $9::bigint)
                OR (t.pool IS NOT NULL AND (t.user_id = excluded.user_id OR NOT EXISTS (${membersOf("$8", "$9::bigint")})))
             RETURNING name`,
            [httpName(name), this.side.nodeId, owner.userId, owner.username, owner.tokenId, now, serving.pool, name, this.side.expiryMs],
          );
          if (rows.length === 0) throw new NameLost(name);
        }
        await tx.unsafe(
          `INSERT INTO live_tunnels (name, protocol, subdomain, hostname, node_id, session_id, user_id, username, token_id, connected_at, skip_warning, response_timeout_ms, pool, in_rotation)
           VALUES ($1, 'http', $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, FALSE)
           ON CONFLICT (name) DO UPDATE SET session_id = excluded.session_id, node_id = excluded.node_id, connected_at = excluded.connected_at`,
          [memberRow(memberId), names[0], names[1] ?? null, this.side.nodeId, sessionId, owner.userId, owner.username, owner.tokenId, now, serving.skipWarning, serving.responseTimeoutMs ?? null, serving.pool],
        );
      });
    } catch (err) {
      if (err instanceof NameLost) return err.name;
      throw err;
    }
    // not in rotation yet, so not yet told of: the other nodes learn of it once its agent has heard READY (rotated)
    return undefined;
  }

  /** A pool member leaves: its row goes, and each of the pool's names whose members are all gone now is free. */
  async leavePool(t: Tunnel): Promise<void> {
    await this.side.quietly("release", this.side.sql`DELETE FROM live_tunnels WHERE name = ${memberRow(t.id)} AND node_id = ${this.side.nodeId}`);
    if (t.port !== undefined) return;
    const names = namesOfTunnel(t);
    await this.freeNamesWithoutMembers(names);
    for (const name of names) await this.side.notify({ kind: "pool", name });
  }

  /** A member claimed at a handshake that no tunnel of this node took after all (a refusal after it, the agent gone). */
  async dropMember(memberId: string): Promise<void> {
    const t = this.side.registry.allTunnels().find((x) => x.id === memberId);
    if (t) return;
    const rows = await this.side.sql`DELETE FROM live_tunnels WHERE name = ${memberRow(memberId)} AND node_id = ${this.side.nodeId} RETURNING subdomain, hostname`;
    const names = rows.flatMap((r: { subdomain: string | null; hostname: string | null }) => [r.subdomain, r.hostname]).filter((n: string | null): n is string => n !== null);
    if (names.length > 0) await this.freeNamesWithoutMembers(names);
  }

  /** Each of a pool's `names` whose members are all gone is free: under the names' locks, as a join takes them, so no join in progress loses its name. */
  private freeNamesWithoutMembers(names: string[]): Promise<void> {
    return this.side.quietly(
      "pool release",
      this.side.sql.begin(async (tx) => {
        await lockPoolNames(tx, names);
        for (const name of names) {
          await tx.unsafe(`DELETE FROM live_tunnels WHERE name = $1 AND pool IS NOT NULL AND NOT EXISTS (${membersOf("$2", "$3::bigint")})`, [httpName(name), name, this.side.expiryMs]);
        }
      }),
    );
  }

  /** A pool member in or out of rotation: written now, and the other nodes ask again whom to send to. */
  rotated(t: Tunnel): Promise<void> {
    if (!t.pool) return Promise.resolve();
    const write = async () => {
      // what it is when this write's turn comes: a later change meanwhile is written by its own turn, to the same end
      await this.side.quietly("rotation", this.side.sql`UPDATE live_tunnels SET in_rotation = ${t.inRotation} WHERE name = ${memberRow(t.id)} AND node_id = ${this.side.nodeId}`);
      if (t.port === undefined) for (const name of namesOfTunnel(t)) await this.side.notify({ kind: "pool", name });
    };
    const next = (this.rotations.get(t.id) ?? Promise.resolve()).then(write);
    this.rotations.set(t.id, next);
    void next.then(() => {
      if (this.rotations.get(t.id) === next) this.rotations.delete(t.id);
    });
    return next;
  }
}
