/** Users and their limits; the rule that an enabled admin always remains. */
import { and, asc, count, eq, isNull, ne, sql } from "drizzle-orm";
import type { Db } from "../db/open.ts";
import { adminKeys, sessions, users, type UserRow } from "../db/schema.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import type { Role, TrafficPeriod } from "./fields.ts";
import type { LiveTunnels } from "./live.ts";
import { hashPassword } from "./passwords.ts";

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
  requireAuth?: boolean;
  /** Comma-separated, as fields.ts's cidrList gives it. */
  allowCidrs?: string;
}

export interface NewUser extends UserSettings {
  username: string;
  password: string;
}

export interface UserChanges extends UserSettings {
  username?: string;
  password?: string;
}

export type Users = ReturnType<typeof createUsers>;

export function createUsers(db: Db, clock: Clock, live: LiveTunnels) {
  const byName = (username: string) =>
    db.select().from(users).where(sql`lower(${users.username}) = lower(${username})`).get();

  function get(id: number): UserRow {
    const row = db.select().from(users).where(eq(users.id, id)).get();
    if (!row) throw notFound("user");
    return row;
  }

  function assertNameFree(username: string, exceptId?: number) {
    const other = byName(username);
    if (other && other.id !== exceptId) throw new AppError("USERNAME_TAKEN", `username '${username}' is already taken`);
  }

  /** Refuses a change that would leave no enabled admin. */
  function assertAnotherAdmin(id: number, action: string) {
    const others = db
      .select({ n: count() })
      .from(users)
      .where(and(eq(users.role, "admin"), eq(users.enabled, true), ne(users.id, id)))
      .get();
    if (!others || others.n === 0) throw new AppError("LAST_ADMIN", `cannot ${action} the last enabled admin`);
  }

  return {
    get,
    byName,
    list: () => db.select().from(users).orderBy(asc(users.id)).all(),
    count: () => db.select({ n: count() }).from(users).get()?.n ?? 0,
    countEnabledAdmins: () =>
      db.select({ n: count() }).from(users).where(and(eq(users.role, "admin"), eq(users.enabled, true))).get()?.n ?? 0,

    async create(input: NewUser): Promise<UserRow> {
      const passwordHash = await hashPassword(input.password);
      const now = isoTimestamp(clock.now());
      return db.transaction((tx) => {
        assertNameFree(input.username);
        const { password: _, ...settings } = input;
        return tx
          .insert(users)
          .values({ ...settings, passwordHash, createdAt: now, updatedAt: now })
          .returning()
          .get();
      });
    },

    async update(id: number, changes: UserChanges): Promise<UserRow> {
      get(id);
      const passwordHash = changes.password === undefined ? undefined : await hashPassword(changes.password);
      const updated = db.transaction((tx) => {
        const current = get(id);
        if (changes.username !== undefined) assertNameFree(changes.username, id);
        const isEnabledAdmin = current.role === "admin" && current.enabled;
        if (isEnabledAdmin && changes.enabled === false) assertAnotherAdmin(id, "disable");
        if (isEnabledAdmin && changes.role === "user") assertAnotherAdmin(id, "demote");
        const { password: _, ...settings } = changes;
        // a disabled user's sessions end for good: re-enabling does not revive old cookies
        if (changes.enabled === false) tx.delete(sessions).where(eq(sessions.userId, id)).run();
        // and an admin who is disabled or demoted loses their API keys for good, for the same reason
        if (changes.enabled === false || changes.role === "user") {
          tx.update(adminKeys)
            .set({ revokedAt: isoTimestamp(clock.now()) })
            .where(and(eq(adminKeys.userId, id), isNull(adminKeys.revokedAt)))
            .run();
        }
        return tx
          .update(users)
          .set({ ...settings, ...(passwordHash ? { passwordHash } : {}), updatedAt: isoTimestamp(clock.now()) })
          .where(eq(users.id, id))
          .returning()
          .get()!;
      });
      if (!updated.enabled) live.closeUser(id, "USER_DISABLED", "the user was disabled");
      // who may reach the user's tunnels applies to the live ones too, not only from their next handshake
      else if (changes.requireAuth !== undefined || changes.allowCidrs !== undefined) live.userAccessChanged?.(updated);
      return updated;
    },

    /** Deletes the user with its tokens, reserved subdomains, sessions and traffic (all in one transaction). */
    delete(id: number): void {
      db.transaction((tx) => {
        const current = get(id);
        if (current.role === "admin" && current.enabled) assertAnotherAdmin(id, "delete");
        // the foreign keys cascade to tokens, reserved_subdomains, sessions and traffic_daily
        tx.delete(users).where(eq(users.id, id)).run();
      });
      live.closeUser(id, "USER_DISABLED", "the user was deleted");
    },
  };
}
