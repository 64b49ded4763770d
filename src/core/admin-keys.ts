/**
 * Admin API keys: what a script sends as `Authorization: Bearer brk_...` to
 * act as the admin who made the key. A secret is "brk_" + 43 base62
 * characters (256 bits), shown once; like a device token (tokens.ts) only
 * its SHA-256 is kept, found by its first characters and compared in
 * constant time.
 *
 * A key works while it is not revoked, not expired, and its admin is still
 * an enabled admin. Disabling or demoting the admin revokes their keys for
 * good (users.ts), as it ends their sessions: enabling them again revives
 * neither.
 */
import { asc, eq } from "drizzle-orm";
import type { AdminKeyRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import { findBySecret, newPrefixedSecret } from "./secrets.ts";

export const ADMIN_KEY_PREFIX = "brk_";
/** last_used is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60 * 1000;
const DAY_MS = 86_400_000;

export const MAX_KEY_DAYS = 3650;

/** A key as the list shows it: never its secret. */
export interface AdminKey extends AdminKeyRow {
  username: string;
}

export type AdminKeys = ReturnType<typeof createAdminKeys>;

export function createAdminKeys(store: Store, clock: Clock) {
  const { adminKeys, users } = store.tables;
  const unauthorized = (why: string) => new AppError("UNAUTHORIZED", why);

  const listQuery = () =>
    store.db
      .select({ key: adminKeys, username: users.username })
      .from(adminKeys)
      .innerJoin(users, eq(adminKeys.userId, users.id));

  async function get(id: number): Promise<AdminKey> {
    const found = await store.get(listQuery().where(eq(adminKeys.id, id)));
    if (!found) throw notFound("API key");
    return { ...found.key, username: found.username };
  }

  return {
    get,
    list: async (): Promise<AdminKey[]> =>
      (await store.all(listQuery().orderBy(asc(adminKeys.id)))).map((r) => ({ ...r.key, username: r.username })),

    /** Makes a key for `userId`; the returned secret exists nowhere else and cannot be recovered. */
    async create(userId: number, name: string, expiresInDays?: number): Promise<{ secret: string; key: AdminKey }> {
      const { secret, lookup, secretHash } = newPrefixedSecret(ADMIN_KEY_PREFIX);
      const now = clock.now();
      const row = await store.get(
        store.db
        .insert(adminKeys)
        .values({
          userId,
          name,
          lookup,
          secretHash,
          createdAt: isoTimestamp(now),
          expiresAt: expiresInDays === undefined ? null : isoTimestamp(new Date(now.getTime() + expiresInDays * DAY_MS)),
        })
        .returning(),
      );
      return { secret, key: await get(row!.id) };
    },

    /** Idempotent: revoking a revoked key answers the same. */
    async revoke(id: number): Promise<AdminKey> {
      const key = await get(id);
      if (key.revokedAt === null) {
        await store.run(store.db.update(adminKeys).set({ revokedAt: isoTimestamp(clock.now()) }).where(eq(adminKeys.id, id)));
      }
      return get(id);
    },

    /**
     * The admin behind a presented secret: 401 when the key is unknown,
     * revoked or expired, or its user is gone or disabled; 403 when the user
     * is no longer an admin (as for a session).
     */
    async authenticate(secret: string): Promise<{ admin: UserRow; keyId: number }> {
      const found = await findBySecret(
        ADMIN_KEY_PREFIX,
        secret,
        (lookup) => store.get(store.db.select({ key: adminKeys, user: users }).from(adminKeys).innerJoin(users, eq(adminKeys.userId, users.id)).where(eq(adminKeys.lookup, lookup))),
        (row) => row.key.secretHash,
      );
      if (!found) throw unauthorized("the API key is not valid");
      const now = clock.now().getTime();
      if (found.key.revokedAt !== null) throw unauthorized("the API key has been revoked");
      if (found.key.expiresAt !== null && Date.parse(found.key.expiresAt) <= now) throw unauthorized("the API key has expired");
      if (!found.user.enabled) throw unauthorized("the account is disabled");
      if (found.user.role !== "admin") throw new AppError("FORBIDDEN", "administrator role required");
      if (found.key.lastUsed === null || now - Date.parse(found.key.lastUsed) > TOUCH_EVERY_MS) {
        await store.run(store.db.update(adminKeys).set({ lastUsed: isoTimestamp(clock.now()) }).where(eq(adminKeys.id, found.key.id)));
      }
      return { admin: found.user, keyId: found.key.id };
    },
  };
}
