/**
 * Custom hostnames: a user's own names (demo.acme.com, *.dev.acme.com) that
 * their tunnels may be reached by once the name is verified. An admin may
 * say it is (admins are trusted); otherwise the owner proves it with a TXT
 * record, `_burrow-challenge.<hostname>`, holding the hostname's token. A
 * hostname is one user's: unique over users, never under the server's own
 * domain (those names are subdomains, reserved another way), and never
 * overlapping another user's: a wildcard that would cover a name someone
 * else registered, or a name under someone else's wildcard, is refused
 * (HOSTNAME_OVERLAP). One user may hold a wildcard and names under it.
 * Rows that overlap from before that rule are settled where a name is
 * used: an exact registration beats a wildcard, and a wildcard never covers
 * another user's name (standing()).
 */
import { randomBytes } from "node:crypto";
import { and, asc, eq, inArray, like, ne } from "drizzle-orm";
import type { Store } from "../db/store.ts";
import { challengeName, coveringWildcard, hostnameCovers, hostnamesOverlap, normalizeHostname } from "../validate/hostname.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, badRequest, notFound } from "./errors.ts";
import { emitNothing, type Emit } from "./events/outbox.ts";

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

/**
 * What a user's tunnel may make of a name: reached by it (`grantedBy`, the
 * user's verified registration that is or covers it), or why not: another
 * user registered it (verified or not), or nothing of the user's grants it.
 */
export type HostnameStanding = { grantedBy: string } | { refused: "another user's" | "not verified" };

export type Hostnames = ReturnType<typeof createHostnames>;

/** Held while a hostname is registered: two overlapping names registered at once (two nodes) cannot both pass the check. */
const REGISTER_LOCK = "custom_hostnames.register";

export function createHostnames(store: Store, clock: Clock, domain: string, lookupTxt: TxtLookup, emit: Emit = emitNothing) {
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
  /**
   * Another user's registration that names a host `hostname` names too: for
   * a name, the one wildcard that could cover it; for a wildcard, the names
   * one label under its base (LIKE narrows, hostnamesOverlap decides).
   */
  const othersOverlapping = async (hostname: string, userId: number) => {
    const candidates = await store.all(
      query().where(
        and(
          ne(customHostnames.userId, userId),
          hostname.startsWith("*.") ? like(customHostnames.hostname, `%${hostname.slice(1)}`) : eq(customHostnames.hostname, coveringWildcard(hostname)),
        ),
      ),
    );
    return candidates.find((c) => hostnamesOverlap(c.hostname, hostname));
  };
  const byId = async (id: number) => {
    const found = await store.get(query().where(eq(customHostnames.id, id)));
    if (!found) throw notFound("hostname");
    return found;
  };

  /**
   * Whether the user's tunnels may be reached by `name` (one name, kept
   * form). Only two registrations can speak for it: the name itself and the
   * one wildcard that covers it. The name's own registration decides when
   * there is one: another user's (verified or pending) refuses, whatever
   * wildcard this user holds; the user's own verified one grants. Else the
   * user's verified wildcard grants.
   */
  async function standing(userId: number, name: string): Promise<HostnameStanding> {
    const rows = await store.all(
      store.db
        .select({ hostname: customHostnames.hostname, userId: customHostnames.userId, verified: customHostnames.verified })
        .from(customHostnames)
        .where(inArray(customHostnames.hostname, [name, coveringWildcard(name)])),
    );
    const exact = rows.find((r) => r.hostname === name);
    if (exact && exact.userId !== userId) return { refused: "another user's" };
    const mine = rows.filter((r) => r.userId === userId && r.verified);
    const granted = mine.find((r) => r.hostname === name) ?? mine.find((r) => hostnameCovers(r.hostname, name));
    return granted ? { grantedBy: granted.hostname } : { refused: "not verified" };
  }

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
        await store.lock(REGISTER_LOCK);
        const owner = await store.get(store.db.select({ username: users.username }).from(users).where(eq(users.id, userId)));
        if (!owner) throw notFound("user");
        const taken = await store.get(store.db.select({ id: customHostnames.id }).from(customHostnames).where(eq(customHostnames.hostname, hostname)));
        if (taken) throw new AppError("HOSTNAME_TAKEN", `hostname '${hostname}' is registered already`);
        const other = await othersOverlapping(hostname, userId);
        if (other) {
          // the admin API's answer: an admin sees every user's hostnames, so naming the owner tells nothing new
          throw new AppError("HOSTNAME_OVERLAP", `hostname '${hostname}' overlaps '${other.hostname}', registered to user '${other.username}': a wildcard may not cover another user's name`);
        }
        const now = isoTimestamp(clock.now());
        const row = await store.get(
          store.db
            .insert(customHostnames)
            .values({ hostname, userId, verified, token: randomBytes(16).toString("hex"), createdAt: now, verifiedAt: verified ? now : null })
            .returning(),
        );
        if (verified) await emit({ type: "hostname.verified", data: { user_id: userId, username: owner.username, hostname_id: row!.id, hostname } });
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
      await store.transaction(async () => {
        const changed = await store.get(store.db.update(customHostnames).set({ verified: true, verifiedAt: now }).where(and(eq(customHostnames.id, id), eq(customHostnames.verified, false))).returning({ id: customHostnames.id }));
        if (changed) await emit({ type: "hostname.verified", data: { user_id: h.userId, username: h.username, hostname_id: id, hostname: h.hostname } });
      });
      return { ...h, verified: true, verifiedAt: now };
    },

    /** Returns what was deleted, for the audit log. */
    async remove(id: number): Promise<{ hostname: string; userId: number }> {
      const gone = await store.get(store.db.delete(customHostnames).where(eq(customHostnames.id, id)).returning());
      if (!gone) throw notFound("hostname");
      return gone;
    },

    standing,

    /** The user's verified hostname that is or covers `name`, if any (what a tunnel may be reached by): standing()'s grant. */
    async verifiedFor(userId: number, name: string): Promise<string | undefined> {
      const s = await standing(userId, name);
      return "grantedBy" in s ? s.grantedBy : undefined;
    },
  };
}
