/**
 * ACME shared by the nodes (acme/shared.ts) in PostgreSQL's `acme_*` tables,
 * with NOTIFY (cluster.ts) telling the other nodes at once. Rows carry the
 * database's clock, as live_tunnels do: nodes whose clocks differ still
 * agree on when a lease or an answer ends.
 *
 * A published answer is on every node before the CA is asked to look: each
 * live node that takes it says so (acme-seen), and the publishing node
 * waits for all of them, at most SEEN_WAIT_MS. PostgreSQL delivers a
 * notification to every listener at commit, but a busy node may read it a
 * moment later, after the CA asked it.
 */
import type { SQL } from "bun";
import type { AcmeSharing, SharedCertificate, SharedChallenge, SharingHandlers } from "../acme/shared.ts";
import { NOW_MS } from "./db-clock.ts";
import type { Said } from "./messages.ts";

/** How long a publishing node waits for the other nodes to say they serve an answer before it goes on anyway. */
export const SEEN_WAIT_MS = 5_000;
const WEEK_MS = 7 * 24 * 60 * 60 * 1000;
/** pg_advisory_xact_lock's key for counting on-demand names: "acme" in ASCII. */
const ON_DEMAND_LOCK = 0x61636d65;

type AcmeMessage = Extract<Said, { kind: "acme-certificate" | "acme-challenge" | "acme-seen" }>;

const challengeId = (c: SharedChallenge) => `${c.type} ${c.name} ${c.value}`;

export class ClusterAcme implements AcmeSharing {
  private handlers?: SharingHandlers;
  /** Answers published by this node, waiting for the live nodes that have not yet said they serve them. */
  private readonly unseen = new Map<string, { nodes: Set<string>; done: () => void }>();

  constructor(
    private readonly sql: SQL,
    private readonly nodeId: string,
    private readonly notify: (message: AcmeMessage) => Promise<void>,
    /** --node-expiry (cluster.ts): the nodes whose heartbeat is younger are waited for. */
    private readonly expiryMs = 5_000,
  ) {}

  async accountKey(make: () => Promise<string>): Promise<string> {
    const stored = await this.storedKey();
    if (stored) return stored;
    const made = await make();
    // two nodes starting at once: the first insert wins, and both use it
    await this.sql`INSERT INTO acme_account (id, key_pem, created_at) VALUES ('cluster', ${made}, ${new Date().toISOString()}) ON CONFLICT (id) DO NOTHING`;
    return (await this.storedKey()) ?? made;
  }

  private async storedKey(): Promise<string | undefined> {
    const rows: { key_pem: string }[] = await this.sql`SELECT key_pem FROM acme_account WHERE id = 'cluster'`;
    return rows[0]?.key_pem;
  }

  async certificates(): Promise<SharedCertificate[]> {
    const rows: { id: string; cert_pem: string; key_pem: string }[] = await this.sql`SELECT id, cert_pem, key_pem FROM acme_certificates ORDER BY id`;
    return rows.map((r) => ({ id: r.id, certPem: r.cert_pem, keyPem: r.key_pem }));
  }

  async certificate(id: string): Promise<SharedCertificate | undefined> {
    const rows: { cert_pem: string; key_pem: string }[] = await this.sql`SELECT cert_pem, key_pem FROM acme_certificates WHERE id = ${id}`;
    return rows[0] && { id, certPem: rows[0].cert_pem, keyPem: rows[0].key_pem };
  }

  async putCertificate(cert: SharedCertificate & { notAfter: Date }): Promise<void> {
    const notAfter = cert.notAfter.toISOString();
    // never replaced by one that ends sooner (a node with an old copy on its disk)
    await this.sql`
      INSERT INTO acme_certificates (id, cert_pem, key_pem, not_after, stored_by, stored_at)
      VALUES (${cert.id}, ${cert.certPem}, ${cert.keyPem}, ${notAfter}, ${this.nodeId}, ${new Date().toISOString()})
      ON CONFLICT (id) DO UPDATE SET cert_pem = excluded.cert_pem, key_pem = excluded.key_pem, not_after = excluded.not_after,
        stored_by = excluded.stored_by, stored_at = excluded.stored_at
      WHERE acme_certificates.not_after <= excluded.not_after`;
    await this.notify({ kind: "acme-certificate", id: cert.id });
  }

  async publish(challenge: SharedChallenge, ttlMs: number): Promise<void> {
    await this.sql.unsafe(`DELETE FROM acme_challenges WHERE expires_ms <= ${NOW_MS}`);
    await this.sql.unsafe(
      `INSERT INTO acme_challenges (id, type, name, value, expires_ms) VALUES ($1, $2, $3, $4, ${NOW_MS} + $5)
       ON CONFLICT (id) DO UPDATE SET expires_ms = excluded.expires_ms`,
      [challengeId(challenge), challenge.type, challenge.name, challenge.value, ttlMs],
    );
    const id = challengeId(challenge);
    const live: { id: string }[] = await this.sql.unsafe(`SELECT id FROM cluster_nodes WHERE id <> $1 AND heartbeat_ms > ${NOW_MS} - $2`, [this.nodeId, this.expiryMs]);
    if (live.length === 0) return void (await this.notify({ kind: "acme-challenge", ...challenge, added: true }));
    let timer: ReturnType<typeof setTimeout> | undefined;
    const seen = new Promise<void>((resolve) => {
      this.unseen.set(id, { nodes: new Set(live.map((n) => n.id)), done: resolve });
      timer = setTimeout(resolve, SEEN_WAIT_MS);
    });
    try {
      await this.notify({ kind: "acme-challenge", ...challenge, added: true });
      await seen;
    } finally {
      clearTimeout(timer);
      this.unseen.delete(id);
    }
  }

  async withdraw(challenge: SharedChallenge): Promise<void> {
    await this.sql`DELETE FROM acme_challenges WHERE id = ${challengeId(challenge)}`;
    await this.notify({ kind: "acme-challenge", ...challenge, added: false });
  }

  async challenges(): Promise<SharedChallenge[]> {
    const rows: SharedChallenge[] = await this.sql.unsafe(`SELECT type, name, value FROM acme_challenges WHERE expires_ms > ${NOW_MS} ORDER BY id`);
    return rows.map((r) => ({ type: r.type, name: r.name, value: r.value }));
  }

  async lease(id: string, ms: number): Promise<boolean> {
    // taken when free, ended, or this node's already
    const rows = await this.sql.unsafe(
      `INSERT INTO acme_orders (id, node_id, until_ms) VALUES ($1, $2, ${NOW_MS} + $3)
       ON CONFLICT (id) DO UPDATE SET node_id = excluded.node_id, until_ms = excluded.until_ms
       WHERE acme_orders.until_ms <= ${NOW_MS} OR acme_orders.node_id = excluded.node_id
       RETURNING node_id`,
      [id, this.nodeId, ms],
    );
    return rows.length > 0;
  }

  async release(id: string): Promise<void> {
    await this.sql`DELETE FROM acme_orders WHERE id = ${id} AND node_id = ${this.nodeId}`;
  }

  async countOnDemand(name: string, limit: number): Promise<boolean> {
    return await this.sql.begin(async (tx) => {
      // one node counts at a time, so two cannot both take the week's last place
      await tx`SELECT pg_advisory_xact_lock(${ON_DEMAND_LOCK}::int)`;
      await tx.unsafe(`DELETE FROM acme_on_demand WHERE at_ms <= ${NOW_MS} - $1`, [WEEK_MS]);
      const counted: { name: string }[] = await tx`SELECT name FROM acme_on_demand WHERE name = ${name}`;
      if (counted.length > 0) return true;
      const rows: { n: number }[] = await tx`SELECT count(*)::int AS n FROM acme_on_demand`;
      if ((rows[0]?.n ?? 0) >= limit) return false;
      await tx.unsafe(`INSERT INTO acme_on_demand (name, at_ms) VALUES ($1, ${NOW_MS})`, [name]);
      return true;
    });
  }

  listen(handlers: SharingHandlers): void {
    this.handlers = handlers;
  }

  /** A message of the kinds above, from another node or (`own`) come back from this one. */
  received(message: AcmeMessage & { from: string }, own: boolean): void {
    if (own) return;
    if (message.kind === "acme-seen") {
      if (message.to !== this.nodeId) return;
      const waiting = this.unseen.get(message.id);
      waiting?.nodes.delete(message.from);
      if (waiting?.nodes.size === 0) waiting.done();
      return;
    }
    if (message.kind === "acme-challenge") {
      const challenge: SharedChallenge = { type: message.type, name: message.name, value: message.value };
      const handlers = this.handlers;
      if (!handlers) return;
      // served here now: the publisher asks the CA to look once every node has said so
      void Promise.resolve(handlers.challenge(challenge, message.added)).then(() => {
        if (message.added) return this.notify({ kind: "acme-seen", id: challengeId(challenge), to: message.from });
      });
      return;
    }
    this.handlers?.certificate(message.id);
  }
}
