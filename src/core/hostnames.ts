/**
 * Custom hostnames: a user's own names (demo.acme.com, *.dev.acme.com) that
 * their tunnels may be reached by once the name is verified. An admin may
 * say it is (admins are trusted); otherwise the owner proves it with a TXT
 * record, `_burrow-challenge.<hostname>`, holding the hostname's token. A
 * hostname is one user's: unique over users, never under the server's own
 * domain (those names are subdomains, reserved another way).
 */
import { randomBytes } from "node:crypto";
import { and, asc, eq } from "drizzle-orm";
import type { Store } from "../db/store.ts";
import { challengeName, hostnameCovers, normalizeHostname } from "../validate/hostname.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, badRequest, notFound } from "./errors.ts";

export interface CustomHostname {
  id: number;
  hostname: string;
  userId: number;
  username: string;
  verified: boolean;
  token: string;
  createdAt: string;
  verifiedAt: string | null;
}

/**
 * The TXT records at a name, each record's strings joined; [] when it has
 * none. Throws with a short message for a lookup that failed (a timeout,
 * the resolver refusing), which the verification says.
 */
export type TxtLookup = (name: string) => Promise<string[]>;

export type Hostnames = ReturnType<typeof createHostnames>;

export function createHostnames(store: Store, clock: Clock, domain: string, lookupTxt: TxtLookup) {
  const { customHostnames, users } = store.tables;
  const query = () =>
    store.db
      .select({
        id: customHostnames.id,
        hostname: customHostnames.hostname,
        userId: customHostnames.userId,
        username: users.username,
        verified: customHostnames.verified,
        token: customHostnames.token,
        createdAt: customHostnames.createdAt,
        verifiedAt: customHostnames.verifiedAt,
      })
      .from(customHostnames)
      .innerJoin(users, eq(customHostnames.userId, users.id));
  const byId = async (id: number) => {
    const found = await store.get(query().where(eq(customHostnames.id, id)));
    if (!found) throw notFound("hostname");
    return found;
  };

  return {
    list: (userId?: number): Promise<CustomHostname[]> =>
      store.all((userId === undefined ? query() : query().where(eq(customHostnames.userId, userId))).orderBy(asc(customHostnames.id))),

    get: byId,

    /** Registers `raw` for the user: BAD_REQUEST for no hostname or one of the server's own domain, HOSTNAME_TAKEN, NOT_FOUND for no such user. */
    async create(raw: string, userId: number, verified = false): Promise<CustomHostname> {
      const checked = normalizeHostname(raw);
      if ("problem" in checked) throw badRequest(`hostname: ${checked.problem}`);
      const { hostname } = checked;
      const base = hostname.startsWith("*.") ? hostname.slice(2) : hostname;
      if (domain && (base === domain || base.endsWith(`.${domain}`))) {
        throw badRequest(`hostname: '${hostname}' is of this server's own domain ${domain}; its names are subdomains (reserve one with POST /api/domains)`);
      }
      return store.transaction(async () => {
        const owner = await store.get(store.db.select({ username: users.username }).from(users).where(eq(users.id, userId)));
        if (!owner) throw notFound("user");
        const taken = await store.get(store.db.select({ id: customHostnames.id }).from(customHostnames).where(eq(customHostnames.hostname, hostname)));
        if (taken) throw new AppError("HOSTNAME_TAKEN", `hostname '${hostname}' is registered already`);
        const now = isoTimestamp(clock.now());
        const row = await store.get(
          store.db
            .insert(customHostnames)
            .values({ hostname, userId, verified, token: randomBytes(16).toString("hex"), createdAt: now, verifiedAt: verified ? now : null })
            .returning(),
        );
        return { ...row!, username: owner.username };
      });
    },

    /**
     * Looks the hostname's TXT record up: verified once a record holds its
     * token; HOSTNAME_NOT_VERIFIED saying what the lookup found otherwise.
     * A hostname verified already stays so, without a lookup.
     */
    async verify(id: number): Promise<CustomHostname> {
      const h = await byId(id);
      if (h.verified) return h;
      const name = challengeName(h.hostname);
      let found: string[];
      try {
        found = await lookupTxt(name);
      } catch (err) {
        throw new AppError("HOSTNAME_NOT_VERIFIED", `the TXT record at ${name} could not be looked up: ${String((err as Error)?.message ?? err).slice(0, 200)}`);
      }
      if (!found.includes(h.token)) {
        const seen = found.length === 0 ? "no TXT record" : `TXT ${found.slice(0, 5).map((v) => JSON.stringify(v.slice(0, 100))).join(", ")}`;
        throw new AppError("HOSTNAME_NOT_VERIFIED", `${name} has ${seen}, not "${h.token}"`);
      }
      const now = isoTimestamp(clock.now());
      await store.run(store.db.update(customHostnames).set({ verified: true, verifiedAt: now }).where(eq(customHostnames.id, id)));
      return { ...h, verified: true, verifiedAt: now };
    },

    /** Returns what was deleted, for the audit log. */
    async remove(id: number): Promise<{ hostname: string; userId: number }> {
      const gone = await store.get(store.db.delete(customHostnames).where(eq(customHostnames.id, id)).returning());
      if (!gone) throw notFound("hostname");
      return gone;
    },

    /** The user's verified hostname that is or covers `name`, if any (what a tunnel may be reached by). */
    async verifiedFor(userId: number, name: string): Promise<string | undefined> {
      const mine = await store.all(
        store.db
          .select({ hostname: customHostnames.hostname })
          .from(customHostnames)
          .where(and(eq(customHostnames.userId, userId), eq(customHostnames.verified, true))),
      );
      return mine.map((h) => h.hostname).find((h) => hostnameCovers(h, name));
    },
  };
}
