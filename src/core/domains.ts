/**
 * Reserved subdomains: a name that only its owner's tunnels may use. System
 * names (www, admin, ...) can be neither reserved nor used by anyone.
 */
import { asc, eq } from "drizzle-orm";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, badRequest, notFound } from "./errors.ts";

export interface ReservedSubdomain {
  id: number;
  subdomain: string;
  userId: number;
  username: string;
  createdAt: string;
}

export type Domains = ReturnType<typeof createDomains>;

export function createDomains(store: Store, clock: Clock, systemSubdomains: readonly string[]) {
  const { reservedSubdomains, users } = store.tables;
  const query = () =>
    store.db
      .select({
        id: reservedSubdomains.id,
        subdomain: reservedSubdomains.subdomain,
        userId: reservedSubdomains.userId,
        username: users.username,
        createdAt: reservedSubdomains.createdAt,
      })
      .from(reservedSubdomains)
      .innerJoin(users, eq(reservedSubdomains.userId, users.id));

  const isSystem = (subdomain: string) => systemSubdomains.includes(subdomain);

  const reservedListeners = new Set<(subdomain: string) => void>();
  return {
    isSystem,
    /** Calls `listener` with each name reserved from now on (the edge asks for its certificate); returns the unsubscribe. */
    onReserve(listener: (subdomain: string) => void): () => void {
      reservedListeners.add(listener);
      return () => reservedListeners.delete(listener);
    },
    list: (): Promise<ReservedSubdomain[]> => store.all(query().orderBy(asc(reservedSubdomains.id))),
    listForUser: (userId: number): Promise<ReservedSubdomain[]> =>
      store.all(query().where(eq(reservedSubdomains.userId, userId)).orderBy(asc(reservedSubdomains.id))),
    /** The owner's id, or undefined when nobody reserved the name. */
    ownerOf: async (subdomain: string): Promise<number | undefined> =>
      (
        await store.get(
          store.db
            .select({ userId: reservedSubdomains.userId })
            .from(reservedSubdomains)
            .where(eq(reservedSubdomains.subdomain, subdomain)),
        )
      )?.userId,

    /** `subdomain` must already be a valid, lowercased label. */
    async reserve(subdomain: string, userId: number): Promise<ReservedSubdomain> {
      if (isSystem(subdomain)) throw badRequest(`subdomain: '${subdomain}' is a system name and cannot be reserved`);
      const reserved = await store.transaction(async () => {
        const owner = await store.get(store.db.select({ username: users.username }).from(users).where(eq(users.id, userId)));
        if (!owner) throw notFound("user");
        const taken = await store.get(
          store.db
            .select({ id: reservedSubdomains.id })
            .from(reservedSubdomains)
            .where(eq(reservedSubdomains.subdomain, subdomain)),
        );
        if (taken) throw new AppError("SUBDOMAIN_ALREADY_RESERVED", `subdomain '${subdomain}' is already reserved`);
        const row = await store.get(
          store.db
            .insert(reservedSubdomains)
            .values({ subdomain, userId, createdAt: isoTimestamp(clock.now()) })
            .returning(),
        );
        return { ...row!, username: owner.username };
      });
      for (const listener of reservedListeners) listener(reserved.subdomain);
      return reserved;
    },

    /** Returns what was released, for the audit log. */
    async release(id: number): Promise<{ subdomain: string; userId: number }> {
      const gone = await store.get(store.db.delete(reservedSubdomains).where(eq(reservedSubdomains.id, id)).returning());
      if (!gone) throw notFound("reserved subdomain");
      return gone;
    },
  };
}
