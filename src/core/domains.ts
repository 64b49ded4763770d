/**
 * Reserved subdomains: a name that only its owner's tunnels may use. System
 * names (www, admin, ...) can be neither reserved nor used by anyone.
 */
import { asc, eq } from "drizzle-orm";
import type { Db } from "../db/open.ts";
import { reservedSubdomains, users } from "../db/schema.ts";
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

export function createDomains(db: Db, clock: Clock, systemSubdomains: readonly string[]) {
  const query = () =>
    db
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
    list: (): ReservedSubdomain[] => query().orderBy(asc(reservedSubdomains.id)).all(),
    listForUser: (userId: number): ReservedSubdomain[] =>
      query().where(eq(reservedSubdomains.userId, userId)).orderBy(asc(reservedSubdomains.id)).all(),
    /** The owner's id, or undefined when nobody reserved the name. */
    ownerOf: (subdomain: string): number | undefined =>
      db
        .select({ userId: reservedSubdomains.userId })
        .from(reservedSubdomains)
        .where(eq(reservedSubdomains.subdomain, subdomain))
        .get()?.userId,

    /** `subdomain` must already be a valid, lowercased label. */
    reserve(subdomain: string, userId: number): ReservedSubdomain {
      if (isSystem(subdomain)) throw badRequest(`subdomain: '${subdomain}' is a system name and cannot be reserved`);
      const reserved = db.transaction((tx) => {
        const owner = tx.select({ username: users.username }).from(users).where(eq(users.id, userId)).get();
        if (!owner) throw notFound("user");
        const taken = tx
          .select({ id: reservedSubdomains.id })
          .from(reservedSubdomains)
          .where(eq(reservedSubdomains.subdomain, subdomain))
          .get();
        if (taken) throw new AppError("SUBDOMAIN_ALREADY_RESERVED", `subdomain '${subdomain}' is already reserved`);
        const row = tx
          .insert(reservedSubdomains)
          .values({ subdomain, userId, createdAt: isoTimestamp(clock.now()) })
          .returning()
          .get();
        return { ...row, username: owner.username };
      });
      for (const listener of reservedListeners) listener(reserved.subdomain);
      return reserved;
    },

    /** Returns what was released, for the audit log. */
    release(id: number): { subdomain: string; userId: number } {
      const gone = db.delete(reservedSubdomains).where(eq(reservedSubdomains.id, id)).returning().get();
      if (!gone) throw notFound("reserved subdomain");
      return gone;
    },
  };
}
