/**
 * The operator's traffic policies (docs/policy.md): each a named document,
 * kept as written (YAML or JSON, so its errors keep their lines), and the
 * tunnels it covers: every one (scope "server"), a user's ("user"), or
 * those reached by a hostname or under a wildcard ("hostname", which may be
 * a name under the server's own domain: a subdomain's tunnel). The edge
 * runs them before a tunnel's own policy, which cannot lift them.
 *
 * Whether a document loads is the policy engine's to say (the admin API
 * asks it before it writes here); this file keeps the rows, and tells the
 * edge of this process at once when they change (watch), while the other
 * nodes find the change by its marks (ids and update times), which they
 * read every few seconds.
 */
import { asc, eq } from "drizzle-orm";
import type { Store } from "../db/store.ts";
import { normalizeHostname } from "../validate/hostname.ts";
import type { Clock } from "./clock.ts";
import { AppError, badRequest, notFound } from "./errors.ts";

export const POLICY_SCOPES = ["server", "user", "hostname"] as const;
export type PolicyScopeName = (typeof POLICY_SCOPES)[number];

export interface OperatorPolicyRecord {
  id: number;
  name: string;
  scope: PolicyScopeName;
  userId: number | null;
  username: string | null;
  hostname: string | null;
  document: string;
  createdAt: string;
  updatedAt: string;
}

/** What a policy is made or changed with; on update, only what is given changes (a new scope clears what the old one named). */
export interface PolicyFields {
  name?: string;
  scope?: PolicyScopeName;
  userId?: number;
  hostname?: string;
  document?: string;
}

export type TrafficPolicies = ReturnType<typeof createTrafficPolicies>;

/** `domain`: the server's own, whose wildcard (every subdomain's tunnel) a scope may name even when it is one label (localhost). */
export function createTrafficPolicies(store: Store, clock: Clock, domain = "") {
  const { trafficPolicies, users } = store.tables;
  const listeners = new Set<() => void>();
  const changed = () => {
    for (const l of listeners) l();
  };
  const query = () =>
    store.db
      .select({
        id: trafficPolicies.id,
        name: trafficPolicies.name,
        scope: trafficPolicies.scope,
        userId: trafficPolicies.userId,
        username: users.username,
        hostname: trafficPolicies.hostname,
        document: trafficPolicies.document,
        createdAt: trafficPolicies.createdAt,
        updatedAt: trafficPolicies.updatedAt,
      })
      .from(trafficPolicies)
      .leftJoin(users, eq(trafficPolicies.userId, users.id));
  const byId = async (id: number): Promise<OperatorPolicyRecord> => {
    const found = await store.get(query().where(eq(trafficPolicies.id, id)));
    if (!found) throw notFound("policy");
    return found;
  };

  /** The scope's columns, checked: a user that exists, a hostname in its kept form; nothing the scope does not take. */
  async function scopeColumns(f: Required<Pick<PolicyFields, "scope">> & PolicyFields): Promise<{ scope: PolicyScopeName; userId: number | null; hostname: string | null }> {
    if (f.scope === "user") {
      if (f.hostname !== undefined) throw badRequest("hostname: goes with scope hostname, not user");
      if (f.userId === undefined) throw badRequest("user_id: missing: scope user names the user whose tunnels it covers");
      const owner = await store.get(store.db.select({ id: users.id }).from(users).where(eq(users.id, f.userId)));
      if (!owner) throw notFound("user");
      return { scope: "user", userId: f.userId, hostname: null };
    }
    if (f.scope === "hostname") {
      if (f.userId !== undefined) throw badRequest("user_id: goes with scope user, not hostname");
      if (f.hostname === undefined) throw badRequest("hostname: missing: scope hostname names the hostname (or *.wildcard) whose tunnels it covers");
      const own = f.hostname.trim().toLowerCase().replace(/\.$/, "");
      if (domain !== "" && own === `*.${domain}`) return { scope: "hostname", userId: null, hostname: own };
      const checked = normalizeHostname(f.hostname);
      if ("problem" in checked) throw badRequest(`hostname: ${checked.problem}`);
      return { scope: "hostname", userId: null, hostname: checked.hostname };
    }
    if (f.userId !== undefined || f.hostname !== undefined) throw badRequest(`${f.userId !== undefined ? "user_id" : "hostname"}: scope server covers every tunnel and takes neither user_id nor hostname`);
    return { scope: "server", userId: null, hostname: null };
  }

  const taken = (err: unknown, name: string): never => {
    if (/unique|duplicate/i.test(String((err as Error)?.message ?? err))) throw new AppError("POLICY_NAME_TAKEN", `a policy named '${name}' exists already`);
    throw err;
  };

  return {
    /** Every policy, by id (the order the edge runs those of one scope in). */
    list: (): Promise<OperatorPolicyRecord[]> => store.all(query().orderBy(asc(trafficPolicies.id))),

    get: byId,

    async create(f: Required<Pick<PolicyFields, "name" | "scope" | "document">> & PolicyFields): Promise<OperatorPolicyRecord> {
      const columns = await scopeColumns(f);
      const now = clock.now().toISOString();
      const row = await store
        .get(store.db.insert(trafficPolicies).values({ name: f.name, ...columns, document: f.document, createdAt: now, updatedAt: now }).returning({ id: trafficPolicies.id }))
        .catch((err) => taken(err, f.name));
      changed();
      return byId(row!.id);
    },

    async update(id: number, f: PolicyFields): Promise<OperatorPolicyRecord> {
      const before = await byId(id);
      const scoped =
        f.scope !== undefined || f.userId !== undefined || f.hostname !== undefined
          ? await scopeColumns({ ...f, scope: f.scope ?? before.scope })
          : { scope: before.scope, userId: before.userId, hostname: before.hostname };
      // later than the row's last mark, even within the same millisecond: the other nodes see a change by it
      const now = new Date(Math.max(clock.now().getTime(), Date.parse(before.updatedAt) + 1)).toISOString();
      await store
        .run(
          store.db
            .update(trafficPolicies)
            .set({ ...(f.name !== undefined ? { name: f.name } : {}), ...scoped, ...(f.document !== undefined ? { document: f.document } : {}), updatedAt: now })
            .where(eq(trafficPolicies.id, id)),
        )
        .catch((err) => taken(err, f.name ?? before.name));
      changed();
      return byId(id);
    },

    /** Returns what was deleted, for the audit log. */
    async remove(id: number): Promise<{ name: string; scope: PolicyScopeName }> {
      const gone = await store.get(store.db.delete(trafficPolicies).where(eq(trafficPolicies.id, id)).returning({ name: trafficPolicies.name, scope: trafficPolicies.scope }));
      if (!gone) throw notFound("policy");
      changed();
      return gone;
    },

    /** What changes when any policy changes (one made, changed or deleted, a user's deletion taking theirs): ids and update times. */
    async marks(): Promise<string> {
      const rows = await store.all(store.db.select({ id: trafficPolicies.id, updatedAt: trafficPolicies.updatedAt }).from(trafficPolicies).orderBy(asc(trafficPolicies.id)));
      return rows.map((r) => `${r.id}@${r.updatedAt}`).join(",");
    },

    /** Calls `listener` after each change made in this process; returns what stops it. */
    watch(listener: () => void): () => void {
      listeners.add(listener);
      return () => void listeners.delete(listener);
    },
  };
}
