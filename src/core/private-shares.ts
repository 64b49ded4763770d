/**
 * Private tunnels' names and shares: who may reach `owner/name` with
 * `burrow connect`. The owner's agent says the name and the usernames it
 * shares with at each handshake; the names are kept (private_names) while
 * the agent is away, so that a connector is told TUNNEL_OFFLINE (shared,
 * not live now) rather than NOT_SHARED. A connector who is not shared with
 * is told NOT_SHARED whether the owner and the name exist or not: a
 * stranger learns nothing of who has what. The owner always reaches their
 * own.
 */
import { and, eq, inArray, sql } from "drizzle-orm";
import type { UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError } from "./errors.ts";
import type { PrivateKind } from "../protocol/kinds.ts";
import type { Users } from "./users.ts";
import { PRIVATE_NAME_PATTERN } from "../validate/fields.ts";

export { PRIVATE_NAME_PATTERN };
/** Usernames one private tunnel may be shared with. */
export const MAX_SHARES = 64;

/** The kinds a private tunnel may be (protocol/kinds.ts). */
export type PrivateProtocol = PrivateKind;

/** A private tunnel as its owner declared it: the user ids it is shared with. */
export interface PrivateName {
  ownerId: number;
  name: string;
  protocol: PrivateProtocol;
  shares: number[];
  /** The usernames of `shares`, as their users spell them (known when declared). */
  shareNames?: string[];
  localPort: number | null;
}

/** "alice/db" -> { owner: "alice", name: "db" }; undefined when it is not that shape. */
export function parseTarget(raw: string): { owner: string; name: string } | undefined {
  const slash = raw.indexOf("/");
  if (slash <= 0 || slash !== raw.lastIndexOf("/")) return undefined;
  const owner = raw.slice(0, slash);
  const name = raw.slice(slash + 1).toLowerCase();
  return owner.length <= 64 && PRIVATE_NAME_PATTERN.test(name) ? { owner, name } : undefined;
}

export type PrivateShares = ReturnType<typeof createPrivateShares>;

export function createPrivateShares(store: Store, clock: Clock, users: Users) {
  const { privateNames, users: usersTable } = store.tables;

  const notShared = (target: string) => new AppError("NOT_SHARED", `${target} is not shared with you (or there is no such private tunnel)`);

  async function reachOf(connector: UserRow, owner: UserRow | undefined, name: string, target: string): Promise<{ owner: UserRow; declared: PrivateName }> {
    if (!owner || !owner.enabled) throw notShared(target);
    const row = await store.get(store.db.select().from(privateNames).where(and(eq(privateNames.ownerId, owner.id), eq(privateNames.name, name))));
    if (!row) throw notShared(target);
    const shares = JSON.parse(row.shares) as number[];
    // an owner whose can_share was turned off keeps the declaration, and reaches it alone
    if (connector.id !== owner.id && (!owner.canShare || !shares.includes(connector.id))) throw notShared(target);
    return { owner, declared: { ownerId: owner.id, name: row.name, protocol: row.protocol, shares, localPort: row.localPort } };
  }

  return {
    /**
     * The owner's agent declares a private tunnel: its name checked, the
     * usernames it shares with resolved (unknown ones refused, naming them;
     * none at all when the owner may not share), and the declaration kept.
     */
    /** `write: false`: checked and answered as it would be, nothing stored (an agent's check, wire.ts CHECK_PATH). */
    async declare(owner: UserRow, name: string, protocol: PrivateProtocol, shareWith: string[], localPort?: number, opts: { write?: boolean } = {}): Promise<PrivateName> {
      if (!PRIVATE_NAME_PATTERN.test(name)) throw new AppError("PRIVATE_NAME_INVALID", `private tunnel name '${name}' must be 1-63 characters from a-z, 0-9 and -`);
      const wanted = [...new Set(shareWith.map((u) => u.trim()).filter((u) => u !== ""))];
      if (wanted.length > MAX_SHARES) throw new AppError("PRIVATE_NAME_INVALID", `a private tunnel is shared with ${MAX_SHARES} users at most`);
      if (wanted.length > 0 && !owner.canShare) throw new AppError("SHARE_DENIED", `user '${owner.username}' may not share tunnels`);
      const found =
        wanted.length === 0
          ? []
          : await store.all(
              store.db
                .select({ id: usersTable.id, username: usersTable.username })
                .from(usersTable)
                .where(inArray(sql`lower(${usersTable.username})`, wanted.map((u) => u.toLowerCase()))),
            );
      const known = new Set(found.map((u) => u.username.toLowerCase()));
      const unknown = wanted.filter((u) => !known.has(u.toLowerCase()));
      if (unknown.length > 0) throw new AppError("SHARE_UNKNOWN_USER", `no such user: ${unknown.join(", ")}`);
      const shares = found.map((u) => u.id).filter((id) => id !== owner.id);
      const row = { ownerId: owner.id, name, protocol, shares: JSON.stringify(shares), localPort: localPort ?? null, updatedAt: isoTimestamp(clock.now()) };
      if (opts.write !== false) await store.run(
        store.db
          .insert(privateNames)
          .values(row)
          .onConflictDoUpdate({ target: [privateNames.ownerId, privateNames.name], set: { protocol, shares: row.shares, localPort: row.localPort, updatedAt: row.updatedAt } }),
      );
      const shareNames = found.filter((u) => u.id !== owner.id).map((u) => u.username).sort();
      return { ownerId: owner.id, name, protocol, shares, shareNames, localPort: row.localPort };
    },

    /**
     * What `connector` may reach as `target` ("owner/name"): the owner and
     * the declaration, or NOT_SHARED, the same for every way it is not
     * (no such owner or name, not in its shares, or an owner who may no
     * longer share: can_share off, or disabled).
     */
    async reach(connector: UserRow, target: string): Promise<{ owner: UserRow; declared: PrivateName }> {
      const parsed = parseTarget(target);
      if (!parsed) throw new AppError("PRIVATE_NAME_INVALID", `'${target.slice(0, 140)}' is not owner/name, e.g. alice/db`);
      return reachOf(connector, await users.byName(parsed.owner), parsed.name, target);
    },

    /** reach() by the owner's id, for what is live (a connector's stream, a session judged again). */
    async reachById(connector: UserRow, ownerId: number, name: string): Promise<{ owner: UserRow; declared: PrivateName }> {
      const owner = await store.get(store.db.select().from(usersTable).where(eq(usersTable.id, ownerId)));
      return reachOf(connector, owner, name, `${owner?.username ?? ownerId}/${name}`);
    },

    /**
     * The private tunnels shared with `userId` by others (their owners
     * enabled and allowed to share), by owner and name: what that user may `burrow connect` to.
     */
    async sharedWith(userId: number): Promise<{ target: string; protocol: PrivateProtocol }[]> {
      // the shares are a JSON list of ids, "[3,12]": matched as ",3," in ",3,12,"
      const listed = sql`(',' || replace(replace(${privateNames.shares}, '[', ''), ']', '') || ',')`;
      const rows = await store.all(
        store.db
          .select({ owner: usersTable.username, name: privateNames.name, protocol: privateNames.protocol })
          .from(privateNames)
          .innerJoin(usersTable, eq(usersTable.id, privateNames.ownerId))
          .where(and(sql`${listed} LIKE ${`%,${userId},%`}`, eq(usersTable.enabled, true), eq(usersTable.canShare, true))),
      );
      return rows.map((r) => ({ target: `${r.owner}/${r.name}`, protocol: r.protocol })).sort((a, b) => a.target.localeCompare(b.target));
    },

    /** The usernames a declaration shares with, for lists and screens. */
    async usernames(ids: number[]): Promise<string[]> {
      if (ids.length === 0) return [];
      const rows = await store.all(store.db.select({ username: usersTable.username }).from(usersTable).where(inArray(usersTable.id, ids)));
      return rows.map((r) => r.username).sort();
    },
  };
}
