/**
 * Several nodes on one PostgreSQL database: what is live, cluster-wide.
 *
 * Each node keeps its own tunnels in its Registry (the edge's, in memory) and
 * mirrors them into `live_tunnels`, with a heartbeat in `cluster_nodes`:
 *
 * - claiming a subdomain is one INSERT .. ON CONFLICT on its row, so two
 *   agents asking two nodes for one name get exactly one winner (the other
 *   SUBDOMAIN_TAKEN); the same token takes its name back from a tunnel in
 *   grace, from the session it resumes, or from a dead node;
 * - a pool (edge/pool.ts) holds its name by a row of its own, with no
 *   subdomain (no tunnel), and each member has a row "member:<tunnel id>"
 *   on its node: the user's agents on any node join it, another's cannot
 *   take the name while a member is live anywhere, and the last member's
 *   leaving frees it. A visitor's node spreads a pool's requests over its
 *   own members and the others' (relayed), so the pool is one over the
 *   cluster; a tcp pool's port is its node's, as any tcp tunnel's;
 * - a node whose heartbeat is older than --node-expiry (NODE_EXPIRY_MS) is dead: its rows
 *   count for nothing, and are deleted by the next sweep of any node;
 * - the rules that count (max_tunnels, max_devices) count rows of live
 *   nodes, and /api/tunnels/active lists them, the same on every node;
 * - an admin action that closes tunnels (revoke, disable, delete) is
 *   carried out at once on its node and sent to the others with NOTIFY.
 *
 * This file is the node: its life (registered, heartbeat, sync, claimed
 * again when it was taken for dead, gone), the NOTIFY messages, a user's
 * handshakes one at a time, and the answers to LiveView and LiveTunnels.
 * Its parts, each a field, share cluster-context.ts: the names
 * (cluster-names.ts), the pools (cluster-pools.ts) and what is counted and
 * listed over every node (cluster-counts.ts).
 */
import type { SQL } from "bun";
import type { LiveView } from "../core/admission.ts";
import type { ErrorCode } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import type { PoolBalance } from "../core/admission.ts";
import type { ActiveTunnel, AgentAsk, AgentInfo, AskResult, LiveTunnels, RulesChange } from "../core/live.ts";
import { DEFAULT_POOL_SIZE } from "../db/open-postgres.ts";
import { log, quietWarnings } from "../log.ts";
import { namedKindOf } from "../protocol/kinds.ts";
import { WireError } from "../protocol/wire.ts";
import type { Registry } from "../edge/registry.ts";
import { ClusterAcme } from "./acme-sharing.ts";
import { ClusterAgents } from "./cluster-agents.ts";
import type { ClusterSide } from "./cluster-context.ts";
import { ClusterCounts } from "./cluster-counts.ts";
import { ClusterNames } from "./cluster-names.ts";
import { ClusterPools } from "./cluster-pools.ts";
import { NOW_MS } from "./db-clock.ts";
import { httpName, namesOfTunnel, rowsOf } from "./live-rows.ts";
import { readMessage, SHOWN_PAYLOAD, type Said } from "./messages.ts";

/** How often a node says it is alive. */
export const HEARTBEAT_MS = 1_000;
/** A node silent this long is dead: its tunnels are anyone's. */
export const NODE_EXPIRY_MS = 5_000;
/** How often a node writes its tunnels' byte counts and sweeps dead nodes. */
const SYNC_MS = 2_000;
/** A failure of one kind is logged at most this often. */
const FAILURE_LOG_MS = 10_000;
/** The NOTIFY channel the nodes talk on. */
const CHANNEL = "burrow_cluster";

/** pg_advisory_xact_lock's first key for a user's handshakes: "hand" in ASCII. */
const HANDSHAKE_LOCKS = 0x68616e64;
/**
 * A node's handshakes inside their user's lock at once: 4, and at most half
 * the pool. Each holds a pooled connection for its lock while its rules
 * query on others: bounded well under the pool, so they can never wait on
 * each other for one.
 */
export function lockedHandshakes(poolSize: number): number {
  return Math.max(1, Math.min(4, Math.floor(poolSize / 2)));
}


export interface ClusterOptions {
  client: SQL;
  nodeId: string;
  /** Where the other nodes reach this one (relay); undefined: they cannot. */
  nodeUrl?: string;
  /** --node-expiry: a node silent this long is dead (default NODE_EXPIRY_MS). The same on every node. */
  expiryMs?: number;
  /** Connections of the pool (--db-pool): handshakes under a user's lock stay under it. */
  poolSize?: number;
}

export class Cluster implements LiveView, LiveTunnels {
  private readonly sql: SQL;
  readonly nodeId: string;
  private readonly nodeUrl: string | null;
  private timers: ReturnType<typeof setInterval>[] = [];
  /** When each kind of failure was last logged, and how many since: a database that is down says so every 10 s, not every second. */
  private readonly failures = quietWarnings(FAILURE_LOG_MS);
  private readonly expiryMs: number;
  /** Handshakes inside their user's lock at once, on this node. */
  private readonly maxLockedHandshakes: number;
  private lockedHandshakes = 0;
  private readonly waitingHandshakes: (() => void)[] = [];
  private unlisten?: () => Promise<void>;
  private stopped = false;

  /** The edge's, once it exists (attach). */
  private registry!: Registry;

  constructor(
    options: ClusterOptions,
    private readonly core: Core,
  ) {
    this.sql = options.client;
    this.nodeId = options.nodeId;
    this.nodeUrl = options.nodeUrl ?? null;
    this.expiryMs = options.expiryMs ?? NODE_EXPIRY_MS;
    this.maxLockedHandshakes = lockedHandshakes(options.poolSize ?? DEFAULT_POOL_SIZE);
    this.acme = new ClusterAcme(this.sql, this.nodeId, (message) => this.notify(message), this.expiryMs);
    const registry = () => this.registry;
    const side: ClusterSide = {
      sql: this.sql,
      nodeId: this.nodeId,
      expiryMs: this.expiryMs,
      core,
      get registry() {
        return registry();
      },
      quietly: (what, query) => this.quietly(what, query),
      notify: (message) => this.notify(message),
    };
    this.names = new ClusterNames(side);
    this.fleet = new ClusterAgents(side);
    this.counts = new ClusterCounts(side);
    this.pools = new ClusterPools(side);
  }

  /** ACME's account, certificates, answers and orders, shared with the other nodes (acme/shared.ts). */
  readonly acme: ClusterAcme;
  /** The names over the cluster: claimed, held, given back, and found on other nodes. */
  readonly names: ClusterNames;
  /** The pools over the cluster: members joining, leaving, in and out of rotation. */
  readonly pools: ClusterPools;
  /** What is live over every node, as admission counts it and the admin API lists it. */
  private readonly counts: ClusterCounts;
  /** The agents connected to every node, and the server's asks to them. */
  private readonly fleet: ClusterAgents;

  /** The edge's registry: this node's tunnels, mirrored into live_tunnels from now on. */
  attach(registry: Registry): void {
    this.registry = registry;
    registry.hooks = {
      // only the session's own: a newer session of the agent (it resumed) may have written its id already
      detached: (t, sessionId) =>
        void this.quietly("grace", this.sql`UPDATE live_tunnels SET session_id = NULL WHERE name IN ${this.sql(rowsOf(t, this.nodeId))} AND node_id = ${this.nodeId} AND session_id = ${sessionId}`),
      removed: (t) => {
        if (t.pool) return void (t.gone = this.pools.leavePool(t));
        t.gone = this.quietly("release", this.sql`DELETE FROM live_tunnels WHERE name IN ${this.sql(rowsOf(t, this.nodeId))} AND node_id = ${this.nodeId}`).then(() => {
          // its connectors on other nodes are told it is gone (they wait for it, as connectors here do)
          if (t.privateName !== undefined) return this.notify({ kind: "private", ownerId: t.userId, name: t.privateName });
        });
      },
      rotated: (t) => void this.pools.rotated(t),
      sessionChanged: (link) => this.fleet.changed(link),
      sessionGone: (id) => this.fleet.gone(id),
    };
  }

  /** Registers the node (its rows from an earlier life go), listens, and starts the heartbeat. */
  async start(): Promise<void> {
    await this.sql.begin(async (tx) => {
      await tx`DELETE FROM live_tunnels WHERE node_id = ${this.nodeId}`;
      await tx.unsafe(
        `INSERT INTO cluster_nodes (id, url, started_at, heartbeat_ms) VALUES ($1, $2, $3, ${NOW_MS})
         ON CONFLICT (id) DO UPDATE SET url = excluded.url, started_at = excluded.started_at, heartbeat_ms = excluded.heartbeat_ms`,
        [this.nodeId, this.nodeUrl, new Date().toISOString()],
      );
    });
    const subscription = await this.sql.listen(CHANNEL, (payload) => this.received(payload));
    this.unlisten = () => subscription.unlisten();
    // a password guessed at on three nodes is guessed at three times as fast: every node counts every failure
    this.core.loginThrottle.shared = {
      failed: (address, username) => void this.notify({ kind: "login-failed", address, username: username.slice(0, 200) }),
      succeeded: (username) => void this.notify({ kind: "login-ok", username: username.slice(0, 200) }),
    };
    this.timers.push(setInterval(() => void this.heartbeat(), HEARTBEAT_MS));
    this.timers.push(setInterval(() => void this.sync(), SYNC_MS));
    for (const t of this.timers) t.unref();
    log.info("cluster node registered", { node: this.nodeId, node_url: this.nodeUrl ?? "none" });
    this.core.events.later({ type: "node.up", data: { node: this.nodeId, url: this.nodeUrl } });
  }

  /** Leaves the cluster: its rows go, so its names are free at once rather than after --node-expiry. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    this.fleet.stop();
    if (this.registry) this.registry.hooks = undefined;
    this.core.loginThrottle.shared = undefined;
    await this.unlisten?.().catch(() => {});
    await this.quietly("leave", this.sql`DELETE FROM cluster_nodes WHERE id = ${this.nodeId}`);
  }

  private async heartbeat(): Promise<void> {
    if (this.stopped) return;
    try {
      const rows = await this.sql.unsafe(
        `INSERT INTO cluster_nodes (id, url, started_at, heartbeat_ms) VALUES ($1, $2, $3, ${NOW_MS})
         ON CONFLICT (id) DO UPDATE SET heartbeat_ms = excluded.heartbeat_ms RETURNING (xmax = 0) AS inserted`,
        [this.nodeId, this.nodeUrl, new Date().toISOString()],
      );
      // swept as dead while alive (the database was out of reach): what this node still serves is claimed again
      if (rows[0]?.inserted && this.registry) await this.reclaimAll();
    } catch (err) {
      this.warn("heartbeat", err);
    }
  }

  private async reclaimAll(): Promise<void> {
    log.warn("this node was taken for dead: claiming its tunnels again", { node: this.nodeId });
    for (const t of this.registry.allTunnels()) {
      const session = t.agent?.sessionId ?? null;
      const serving = { skipWarning: t.skipWarning, responseTimeoutMs: t.responseTimeoutMs, protocol: namedKindOf(t.protocol) };
      const ok =
        t.pool && t.port === undefined
          ? (await this.pools.joinPool(namesOfTunnel(t), t.id, t, session, { ...serving, pool: t.pool.balance })) === undefined
          : t.port !== undefined
            ? await this.names.registerRow(t, session)
            : t.subdomain !== undefined
              ? (await this.names.claimName(t.subdomain, t, session, undefined, { ...serving, hostname: t.hostname })) &&
                (t.hostname === undefined || (await this.names.claimName(t.hostname, t, session, undefined, { ...serving, twin: true })))
              : await this.names.claimName(t.hostname!, t, session, undefined, serving);
      if (!ok) {
        // another node has the name now: the agent hears it, as at a handshake
        if (t.agent) this.registry.closeSession(t.agent.sessionId, "SUBDOMAIN_TAKEN", `'${t.subdomain ?? t.hostname}' was taken by another node meanwhile`);
        else this.registry.remove(t);
      }
    }
  }

  /**
   * Writes the live tunnels' byte counts, sessions and rotation (for the
   * other nodes' lists and relays: a write missed or overtaken is made good
   * here), holds this node's pools' names again (their row goes with a dead
   * node, while members elsewhere live on), and deletes dead nodes.
   */
  private async sync(): Promise<void> {
    if (this.stopped || !this.registry) return;
    const tunnels = this.registry.allTunnels();
    const rows = tunnels.flatMap((t) => rowsOf(t, this.nodeId).map((name) => ({ name, i: t.bytesIn, o: t.bytesOut, s: t.agent?.sessionId ?? null, r: t.inRotation })));
    if (rows.length > 0) {
      await this.quietly(
        "byte counts",
        this.sql`UPDATE live_tunnels AS t SET bytes_in = v.i, bytes_out = v.o, session_id = v.s, in_rotation = v.r
                 FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS v(name text, i bigint, o bigint, s text, r boolean)
                 WHERE t.name = v.name AND t.node_id = ${this.nodeId}`,
      );
    }
    const pools = new Map<string, { name: string; u: number; un: string; k: number; b: PoolBalance }>();
    for (const t of tunnels) {
      if (!t.pool || t.port !== undefined) continue;
      for (const name of namesOfTunnel(t)) pools.set(name, { name: httpName(name), u: t.userId, un: t.username, k: t.tokenId, b: t.pool.balance });
    }
    if (pools.size > 0) {
      await this.quietly(
        "pool names",
        this.sql.unsafe(
          `INSERT INTO live_tunnels (name, protocol, node_id, user_id, username, token_id, connected_at, pool)
           SELECT v.name, 'http', $1, v.u, v.un, v.k, $2, v.b FROM jsonb_to_recordset($3::jsonb) AS v(name text, u int, un text, k int, b text)
           ON CONFLICT (name) DO NOTHING`,
          [this.nodeId, new Date().toISOString(), JSON.stringify([...pools.values()])],
        ),
      );
    }
    // a dead node's tunnels go with it (the foreign key cascades); the node that sweeps it says so (node.down)
    try {
      const gone = await this.sql.unsafe(`DELETE FROM cluster_nodes WHERE heartbeat_ms < ${NOW_MS} - $1 RETURNING id, heartbeat_ms`, [this.expiryMs]);
      for (const row of gone as { id: string; heartbeat_ms: number | string }[]) {
        log.warn("cluster node taken for dead", { node: row.id });
        this.onNodeDown?.(row.id, new Date(Number(row.heartbeat_ms)));
      }
    } catch (err) {
      if (!this.stopped) this.warn("sweep", err);
    }
  }

  private async quietly(what: string, query: PromiseLike<unknown>): Promise<void> {
    try {
      await query;
    } catch (err) {
      if (!this.stopped) this.warn(what, err);
    }
  }

  private warn(what: string, err: unknown): void {
    this.failures(what, `cluster ${what} failed`, { err: String(err) });
  }

  /**
   * Runs a handshake's rules and claims for one user alone, cluster-wide
   * (an advisory lock on the user's id for a transaction's length): two
   * HELLOs of one user on two nodes at once are counted one after the
   * other, so together they cannot pass max_tunnels or max_devices.
   */
  async oneUserAtATime<T>(userId: number, fn: () => Promise<T>): Promise<T> {
    while (this.lockedHandshakes >= this.maxLockedHandshakes) await new Promise<void>((resolve) => this.waitingHandshakes.push(resolve));
    this.lockedHandshakes++;
    try {
      return await this.sql.begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${HANDSHAKE_LOCKS}::int, ${userId}::int)`;
        return fn();
      });
    } finally {
      this.lockedHandshakes--;
      this.waitingHandshakes.shift()?.();
    }
  }

  /** Told when this node sweeps a dead one (its last heartbeat): node.down and its alert (webhooks/alerts.ts). */
  onNodeDown?: (node: string, lastHeartbeat: Date) => void;

  /** Told when another node says a pool's members changed (edge-nodes.ts forgets what it knew of them). */
  onPoolChanged?: (name: string) => void;

  // -- messages between nodes --------------------------------------------------------------------

  private async notify(message: Said): Promise<void> {
    await this.quietly("notify", this.sql`SELECT pg_notify(${CHANNEL}, ${JSON.stringify({ ...message, from: this.nodeId })})`);
  }

  private received(payload: string): void {
    const m = readMessage(payload);
    if ("problem" in m) {
      // not acted on; a payload is at most 8000 bytes, of which the line shows the start
      this.failures("message", "cluster message not understood, ignored", { why: m.problem, bytes: payload.length, payload: payload.slice(0, SHOWN_PAYLOAD) });
      return;
    }
    // a challenge answer is acknowledged by every node that serves it (acme-sharing.ts)
    if (m.kind === "acme-certificate" || m.kind === "acme-challenge" || m.kind === "acme-seen") return this.acme.received(m, m.from === this.nodeId);
    if (m.from === this.nodeId) return;
    switch (m.kind) {
      case "login-failed":
        return this.core.loginThrottle.failedElsewhere(m.address, m.username);
      case "login-ok":
        return this.core.loginThrottle.succeededElsewhere(m.username);
    }
    if (!this.registry) return;
    switch (m.kind) {
      case "close-user":
        return this.registry.closeUser(m.userId, m.code, m.message);
      case "close-token":
        return this.registry.closeToken(m.tokenId, m.code, m.message);
      case "config":
        return this.registry.configChanged(m.tokenId);
      case "ask":
      case "answered":
        return this.fleet.received(m);
      case "user-access":
        return void this.registry.rulesChanged({ userId: m.userId });
      case "rules": {
        const change = m.userId !== undefined ? { userId: m.userId } : m.hostname !== undefined ? { hostname: m.hostname } : m.subdomain !== undefined ? { subdomain: m.subdomain } : undefined;
        return void (change && this.registry.rulesChanged(change));
      }
      case "taken": {
        // the name went to another node: a tunnel of it kept here (in grace, or a session the agent left) goes;
        // a pool's members only lose it when the cluster took them for gone
        const subdomain = m.name.startsWith("http:") ? m.name.slice(5) : undefined;
        const held = subdomain === undefined ? undefined : this.registry.tunnelBySubdomain(subdomain);
        for (const t of held?.pool ? [...held.pool.members] : held ? [held] : []) {
          if (t.agent) this.registry.closeSession(t.agent.sessionId, WireError.SESSION_REPLACED, "the agent connected to another node");
          else this.registry.remove(t);
        }
        return;
      }
      case "pool":
        return this.onPoolChanged?.(m.name);
      case "private":
        return this.registry.privateChanged(m.ownerId, m.name);
    }
  }

  // -- LiveTunnels (admin actions) ---------------------------------------------------------------

  /** This node's live tunnels and the other nodes' (cluster-counts.ts). */
  list(): Promise<ActiveTunnel[]> {
    return this.counts.list();
  }

  closeUser(userId: number, code: ErrorCode, message: string): void {
    this.registry.closeUser(userId, code, message);
    void this.notify({ kind: "close-user", userId, code, message });
  }

  closeToken(tokenId: number, code: ErrorCode, message: string): void {
    this.registry.closeToken(tokenId, code, message);
    void this.notify({ kind: "close-token", tokenId, code, message });
  }

  /** The agents of every node (cluster-agents.ts). */
  agents(): Promise<AgentInfo[]> {
    return this.fleet.list();
  }

  /** The agent's answer, wherever it is connected. */
  askAgent(id: string, action: AgentAsk): Promise<AskResult> {
    return this.fleet.ask(id, action);
  }

  /** Sent to the token's agents here, and told to the other nodes for theirs. */
  configChanged(tokenId: number): void {
    this.registry.configChanged(tokenId);
    void this.notify({ kind: "config", tokenId });
  }

  /** Judged again here, and on every other node for its own sessions (relayed visitors and connectors meet the rules where the agent is). */
  async rulesChanged(change: RulesChange): Promise<void> {
    const told = this.notify({ kind: "rules", ...change });
    await this.registry.rulesChanged(change);
    await told;
  }

  // -- LiveView (admission): counted over every node (cluster-counts.ts) -------------------------

  liveTokenIds(userId: number) {
    return this.counts.liveTokenIds(userId);
  }

  liveTunnelCount(userId: number, except?: string) {
    return this.counts.liveTunnelCount(userId, except);
  }

  unflushedBytes(userId: number) {
    return this.counts.unflushedBytes(userId);
  }

  subdomainHolder(subdomain: string) {
    return this.counts.subdomainHolder(subdomain);
  }

  userTunnels(userId: number) {
    return this.counts.userTunnels(userId);
  }

  privateHolder(ownerId: number, name: string) {
    return this.counts.privateHolder(ownerId, name);
  }

  sessionTokenId(sessionId: string) {
    return this.counts.sessionTokenId(sessionId);
  }
}
