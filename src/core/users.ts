/** Users and their limits; the rule that an enabled admin always remains. */
import { and, asc, count, eq, isNull, ne, sql } from "drizzle-orm";
import type { UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import type { Role, TrafficPeriod } from "../validate/fields.ts";
import type { LiveTunnels } from "./live.ts";
import { emitNothing, type Emit } from "./events/outbox.ts";
import { hashPassword } from "./passwords.ts";
import { sha256Hex } from "./secrets.ts";

export interface UserSettings {
  role?: Role;
  enabled?: boolean;
  maxTunnels?: number;
  allowedProtocols?: string;
  trafficLimit?: number;
  trafficPeriod?: TrafficPeriod;
  maxDevices?: number;
  skipWarning?: boolean;
  canUseProxy?: boolean;
  /** May share private tunnels (`--share`). */
  canShare?: boolean;
  requireAuth?: boolean;
  /** Comma-separated, as fields.ts's cidrList gives it. */
  allowCidrs?: string;
}

export interface NewUser extends UserSettings {
  username: string;
  /** None for a user of the company's sign-in (oidcSubject): no password signs them in. */
  password?: string;
  /** "<issuer> <subject>" of the company sign-in that makes the user. */
  oidcSubject?: string;
}

export interface UserChanges extends UserSettings {
  username?: string;
  password?: string;
}

export type Users = ReturnType<typeof createUsers>;

/** The settings whose change can narrow what the user's live tunnels and connectors may do (core/live-admission.ts judges them). */
const NARROWING = ["maxTunnels", "allowedProtocols", "maxDevices", "skipWarning", "canUseProxy", "canShare", "requireAuth", "allowCidrs"] as const satisfies readonly (keyof UserSettings)[];

/** Held by changes that could leave no enabled admin, so two at once cannot both pass the check. */
const ADMINS_LOCK = "users.admins";

export function createUsers(store: Store, clock: Clock, live: LiveTunnels, emit: Emit = emitNothing) {
  const { adminKeys, sessions, users } = store.tables;
  const byName = (username: string) =>
    store.get(store.db.select().from(users).where(sql`lower(${users.username}) = lower(${username})`));

  async function get(id: number): Promise<UserRow> {
    const row = await store.get(store.db.select().from(users).where(eq(users.id, id)));
    if (!row) throw notFound("user");
    return row;
  }

  async function assertNameFree(username: string, exceptId?: number) {
    const other = await byName(username);
    if (other && other.id !== exceptId) throw new AppError("USERNAME_TAKEN", `username '${username}' is already taken`);
  }

  /** Refuses a change that would leave no enabled admin. */
  async function assertAnotherAdmin(id: number, action: string) {
    const others = await store.get(
      store.db
        .select({ n: count() })
        .from(users)
        .where(and(eq(users.role, "admin"), eq(users.enabled, true), ne(users.id, id))),
    );
    if (!others || others.n === 0) throw new AppError("LAST_ADMIN", `cannot ${action} the last enabled admin`);
  }

  /**
   * Two requests for one name at once (on two nodes, say) both pass
   * assertNameFree; the unique index then refuses the second, which is told
   * what the first check would have said.
   */
  const nameTakenOnRace = (username: string | undefined) => (err: unknown) => {
    if (username !== undefined && /users_username_nocase|UNIQUE constraint failed: index 'users_username_nocase'/i.test(String(err))) {
      throw new AppError("USERNAME_TAKEN", `username '${username}' is already taken`);
    }
    throw err;
  };

  const countWhere = async (where?: ReturnType<typeof and>) =>
    (await store.get(store.db.select({ n: count() }).from(users).where(where)))?.n ?? 0;

  return {
    get,
    byName,
    list: () => store.all(store.db.select().from(users).orderBy(asc(users.id))),
    /** The user the company's sign-in made for "<issuer> <subject>", if any. */
    byOidcSubject: (subject: string) => store.get(store.db.select().from(users).where(eq(users.oidcSubject, subject))),
    count: () => countWhere(),
    countEnabledAdmins: () => countWhere(and(eq(users.role, "admin"), eq(users.enabled, true))),

    async create(input: NewUser): Promise<UserRow> {
      const passwordHash = input.password === undefined ? "" : await hashPassword(input.password);
      const now = isoTimestamp(clock.now());
      return store.transaction(async () => {
        await assertNameFree(input.username);
        const { password: _, ...settings } = input;
        const row = await store.get(
          store.db
            .insert(users)
            .values({ ...settings, passwordHash, createdAt: now, updatedAt: now })
            .returning(),
        );
        await emit({ type: "user.created", data: { user_id: row!.id, username: row!.username, role: row!.role } });
        return row!;
      }).catch(nameTakenOnRace(input.username));
    },

    /**
     * `keepSession`: the session making the change (its cookie's key), which
     * a new password leaves signed in; every other session of the user's
     * ends with it.
     */
    async update(id: number, changes: UserChanges, opts: { keepSession?: string } = {}): Promise<UserRow> {
      await get(id);
      const passwordHash = changes.password === undefined ? undefined : await hashPassword(changes.password);
      const updated = await store.transaction(async () => {
        await store.lock(ADMINS_LOCK);
        const current = await get(id);
        if (changes.username !== undefined) await assertNameFree(changes.username, id);
        const isEnabledAdmin = current.role === "admin" && current.enabled;
        if (isEnabledAdmin && changes.enabled === false) await assertAnotherAdmin(id, "disable");
        if (isEnabledAdmin && changes.role === "user") await assertAnotherAdmin(id, "demote");
        const { password: _, ...settings } = changes;
        // a disabled user's sessions end for good: re-enabling does not revive old cookies
        if (changes.enabled === false) await store.run(store.db.delete(sessions).where(eq(sessions.userId, id)));
        // a new password ends every session signed in with the old one (admin and portal; every node reads them
        // from here), but the one that made the change; device tokens are not sessions and stay
        else if (changes.password !== undefined) {
          const keep = opts.keepSession === undefined ? "" : sha256Hex(opts.keepSession);
          await store.run(store.db.delete(sessions).where(and(eq(sessions.userId, id), ne(sessions.idHash, keep))));
        }
        // a new role ends the user's admin sessions: a demoted admin's, and none made before revives on a promotion
        if (changes.role !== undefined && changes.role !== current.role) {
          await store.run(store.db.delete(sessions).where(and(eq(sessions.userId, id), eq(sessions.kind, "admin"))));
        }
        // and an admin who is disabled or demoted loses their API keys for good, for the same reason
        if (changes.enabled === false || changes.role === "user") {
          await store.run(
            store.db
              .update(adminKeys)
              .set({ revokedAt: isoTimestamp(clock.now()) })
              .where(and(eq(adminKeys.userId, id), isNull(adminKeys.revokedAt))),
          );
        }
        const row = await store.get(
          store.db
            .update(users)
            .set({ ...settings, ...(passwordHash ? { passwordHash } : {}), updatedAt: isoTimestamp(clock.now()) })
            .where(eq(users.id, id))
            .returning(),
        );
        // the names of what changed, in the API's words; a password's value never
        const fields = Object.entries(changes)
          .filter(([, value]) => value !== undefined)
          .map(([k]) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`));
        if (fields.length > 0) await emit({ type: "user.updated", data: { user_id: id, username: row!.username, fields } });
        if (current.enabled && changes.enabled === false) await emit({ type: "user.disabled", data: { user_id: id, username: row!.username } });
        return row!;
      }).catch(nameTakenOnRace(changes.username));
      if (!updated.enabled) live.closeUser(id, "USER_DISABLED", "the user was disabled");
      // what the user may do applies to what is live too, not only from their next handshake
      else if (NARROWING.some((k) => changes[k] !== undefined)) await live.rulesChanged?.({ userId: id });
      return updated;
    },

    /** Deletes the user with its tokens, reserved subdomains, sessions and traffic (all in one transaction). */
    async delete(id: number): Promise<void> {
      await store.transaction(async () => {
        await store.lock(ADMINS_LOCK);
        const current = await get(id);
        if (current.role === "admin" && current.enabled) await assertAnotherAdmin(id, "delete");
        // the foreign keys cascade to tokens, reserved_subdomains, sessions and traffic_daily
        await store.run(store.db.delete(users).where(eq(users.id, id)));
        await emit({ type: "user.deleted", data: { user_id: id, username: current.username } });
      });
      live.closeUser(id, "USER_DISABLED", "the user was deleted");
    },
  };
}
