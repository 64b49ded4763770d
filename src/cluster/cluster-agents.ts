/**
 * The agents connected to every node, for GET /api/agents and the server's
 * asks to one of them. Each node keeps a row per session of its own in
 * `live_agents` (written when a session goes live or what the list shows of
 * it changes, at most every WRITE_EVERY_MS per session, and deleted when it
 * ends; a dead node's go with it), and lists its own from memory beside the
 * other nodes' rows. An ask for an agent on another node goes there by
 * NOTIFY (`ask`), and its answer comes back the same way (`answered`).
 */
import type { AgentAsk, AgentInfo, AskResult } from "../core/live.ts";
import { ASK_TIMEOUT_MS } from "../edge/agent-management.ts";
import type { AgentLink } from "../edge/registry.ts";
import type { ClusterSide } from "./cluster-context.ts";
import { NOW_MS } from "./db-clock.ts";
import type { Message } from "./messages.ts";

/** A session's row is written at most this often: an agent's STATUS may change a few times a second. */
const WRITE_EVERY_MS = 500;
/** Asks sent to other nodes waiting for their answer, at most (beyond: refused at once). */
const MAX_REMOTE_ASKS = 256;

export class ClusterAgents {
  private readonly pending = new Map<string, ReturnType<typeof setTimeout>>();
  private readonly waiting = new Map<string, (r: AskResult) => void>();

  constructor(private readonly side: ClusterSide) {}

  /** A session here went live or changed: its row is written soon (once for a burst of changes). */
  changed(link: AgentLink): void {
    if (!link.describe || this.pending.has(link.sessionId)) return;
    this.pending.set(
      link.sessionId,
      setTimeout(() => {
        this.pending.delete(link.sessionId);
        if (!this.side.registry.liveSessions().some((s) => s.link === link)) return;
        void this.write(link.describe!());
      }, WRITE_EVERY_MS),
    );
  }

  /** A session here ended: its row goes. */
  gone(sessionId: string): void {
    clearTimeout(this.pending.get(sessionId));
    this.pending.delete(sessionId);
    void this.side.quietly("agent row", this.side.sql`DELETE FROM live_agents WHERE session_id = ${sessionId} AND node_id = ${this.side.nodeId}`);
  }

  private async write(a: AgentInfo): Promise<void> {
    const { id, userId, username, tokenId, connectedAt, remote, ...state } = a;
    const json = JSON.stringify(state);
    await this.side.quietly(
      "agent row",
      this.side.sql`INSERT INTO live_agents (session_id, node_id, user_id, username, token_id, connected_at, remote, state)
                    VALUES (${id}, ${this.side.nodeId}, ${userId}, ${username}, ${tokenId}, ${connectedAt}, ${remote}, ${json})
                    ON CONFLICT (session_id) DO UPDATE SET node_id = excluded.node_id, state = excluded.state`,
    );
  }

  /** This node's agents from memory, and the other live nodes' from their rows. */
  async list(): Promise<AgentInfo[]> {
    const here = this.side.registry.agents().map((a) => ({ ...a, nodeId: this.side.nodeId }));
    const rows = await this.side.sql.unsafe(
      `SELECT a.* FROM live_agents a JOIN cluster_nodes n ON n.id = a.node_id WHERE a.node_id <> $1 AND n.heartbeat_ms > ${NOW_MS} - $2`,
      [this.side.nodeId, this.side.expiryMs],
    );
    const there = (rows as Record<string, any>[]).map((r) => ({
      ...(JSON.parse(r.state) as Omit<AgentInfo, "id" | "userId" | "username" | "tokenId" | "connectedAt" | "remote">),
      id: r.session_id as string,
      nodeId: r.node_id as string,
      userId: r.user_id as number,
      username: r.username as string,
      tokenId: r.token_id as number,
      connectedAt: r.connected_at as string,
      remote: r.remote as string,
    }));
    return [...here, ...there];
  }

  /** The agent's answer, from this node or, by NOTIFY, from the node it is connected to. */
  async ask(id: string, action: AgentAsk): Promise<AskResult> {
    const local = await this.side.registry.askAgent(id, action);
    if (local.found) return local;
    const rows = await this.side.sql.unsafe(
      `SELECT a.node_id FROM live_agents a JOIN cluster_nodes n ON n.id = a.node_id WHERE a.session_id = $1 AND a.node_id <> $2 AND n.heartbeat_ms > ${NOW_MS} - $3`,
      [id, this.side.nodeId, this.side.expiryMs],
    );
    const node = (rows as { node_id: string }[])[0]?.node_id;
    if (node === undefined) return { found: false };
    if (this.waiting.size >= MAX_REMOTE_ASKS) return { found: true, answered: false, why: `${MAX_REMOTE_ASKS} asks wait for other nodes' agents already` };
    const ref = crypto.randomUUID();
    return new Promise((resolve) => {
      // the other node waits ASK_TIMEOUT_MS for its agent: a moment more here for the answer's way back
      const timer = setTimeout(() => {
        this.waiting.delete(ref);
        resolve({ found: true, answered: false });
      }, ASK_TIMEOUT_MS + 2_000);
      this.waiting.set(ref, (r) => {
        clearTimeout(timer);
        this.waiting.delete(ref);
        resolve(r);
      });
      void this.side.notify({ kind: "ask", ref, to: node, session: id, action });
    });
  }

  /** An ask or an answer from another node. */
  received(m: Extract<Message, { kind: "ask" | "answered" }>): void {
    if (m.to !== this.side.nodeId) return;
    if (m.kind === "answered") {
      const { ref, found, answered, accepted, message } = m;
      const unanswered = { found: true as const, answered: false as const, ...(message !== undefined ? { why: message } : {}) };
      this.waiting.get(ref)?.(!found ? { found: false } : !answered ? unanswered : { found: true, answered: true, accepted: accepted ?? false, message: message ?? "" });
      return;
    }
    void this.side.registry.askAgent(m.session, m.action).then((r) =>
      this.side.notify({
        kind: "answered",
        ref: m.ref,
        to: m.from,
        found: r.found,
        answered: r.found && r.answered,
        ...(r.found && r.answered ? { accepted: r.accepted, message: r.message.slice(0, 1000) } : r.found && r.why !== undefined ? { message: r.why.slice(0, 1000) } : {}),
      }),
    );
  }

  stop(): void {
    for (const t of this.pending.values()) clearTimeout(t);
    this.pending.clear();
  }
}
