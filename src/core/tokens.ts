/**
 * Per-device access tokens. A secret is "brw_" + 43 base62 characters (256
 * bits); only its SHA-256 is kept, found by its first characters (lookup) and
 * compared in constant time. Revoking keeps the row, disabled.
 */
import { and, asc, count, eq, isNull } from "drizzle-orm";
import type { TokenRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import type { LiveTunnels } from "./live.ts";
import { findBySecret, newPrefixedSecret } from "./secrets.ts";
import { emitNothing, type Emit } from "./events/outbox.ts";

/** Who made a token: an admin (the admin API), its user on the portal, or a `burrow login` its user approved. */
export type TokenMaker = "admin" | "portal" | "device-login";

export const TOKEN_PREFIX = "brw_";

export type Tokens = ReturnType<typeof createTokens>;

export function createTokens(store: Store, clock: Clock, live: LiveTunnels, emit: Emit = emitNothing) {
  const { tokens, users } = store.tables;
  async function get(id: number): Promise<TokenRow> {
    const row = await store.get(store.db.select().from(tokens).where(eq(tokens.id, id)));
    if (!row) throw notFound("token");
    return row;
  }

  /** The token a presented secret is and its owner, whatever their state; undefined when it is no token of ours. */
  async function identify(secret: unknown): Promise<{ token: TokenRow; user: UserRow } | undefined> {
    return findBySecret(
      TOKEN_PREFIX,
      secret,
      (lookup) => store.get(store.db.select({ token: tokens, user: users }).from(tokens).innerJoin(users, eq(tokens.userId, users.id)).where(eq(tokens.lookup, lookup))),
      (found) => found.token.secretHash,
    );
  }

  /** Makes a token; the returned secret exists nowhere else and cannot be recovered. */
  async function generate(userId: number, deviceName: string, by: TokenMaker = "admin"): Promise<{ secret: string; row: TokenRow }> {
    const { secret, lookup, secretHash } = newPrefixedSecret(TOKEN_PREFIX);
    return store.transaction(async () => {
      const row = await store.get(
        store.db
          .insert(tokens)
          .values({
            userId,
            deviceName,
            lookup,
            secretHash,
            createdAt: isoTimestamp(clock.now()),
          })
          .returning(),
      );
      await emit({ type: "token.created", userId, data: { user_id: userId, username: await usernameOf(userId), token_id: row!.id, device_name: deviceName, by } });
      return { secret, row: row! };
    });
  }

  const usernameOf = async (userId: number) => (await store.get(store.db.select({ username: users.username }).from(users).where(eq(users.id, userId))))?.username ?? "";

  /** Disables the token; its event is said only when it was enabled (revoking twice says it once). */
  async function disable(row: TokenRow): Promise<void> {
    await store.transaction(async () => {
      const changed = await store.get(store.db.update(tokens).set({ enabled: false }).where(and(eq(tokens.id, row.id), eq(tokens.enabled, true))).returning({ id: tokens.id }));
      if (changed) await emit({ type: "token.revoked", userId: row.userId, data: { user_id: row.userId, username: await usernameOf(row.userId), token_id: row.id, device_name: row.deviceName } });
    });
  }

  return {
    get,
    listForUser: (userId: number) =>
      store.all(store.db.select().from(tokens).where(eq(tokens.userId, userId)).orderBy(asc(tokens.id))),

    generate,

    /**
     * A token the user makes for themselves (the portal, `burrow login`):
     * refused with TOO_MANY_DEVICES when they hold `max_devices` enabled
     * tokens already. Admins' tokens (the admin API) are not held to it.
     */
    async generateWithinLimit(user: UserRow, deviceName: string, by: TokenMaker = "portal"): Promise<{ secret: string; row: TokenRow }> {
      return store.transaction(async () => {
        await store.lock(`tokens.user.${user.id}`); // two at once cannot both pass the count
        if (user.maxDevices > 0) {
          const held = (await store.get(store.db.select({ n: count() }).from(tokens).where(and(eq(tokens.userId, user.id), eq(tokens.enabled, true)))))?.n ?? 0;
          if (held >= user.maxDevices) {
            throw new AppError("TOO_MANY_DEVICES", `you have ${held} of your ${user.maxDevices} devices already: revoke one you no longer use first`);
          }
        }
        return generate(user.id, deviceName, by);
      });
    },

    /** Revokes a token of this user's only: another's is as unknown as one that does not exist (404). */
    async revokeOwn(userId: number, id: number): Promise<TokenRow> {
      const row = await store.get(store.db.select().from(tokens).where(and(eq(tokens.id, id), eq(tokens.userId, userId))));
      if (!row) throw notFound("token");
      await disable(row);
      live.closeToken(id, "TOKEN_DISABLED", "the token was revoked");
      return row;
    },

    /** Idempotent: revoking a revoked token answers the same. */
    async revoke(id: number): Promise<void> {
      await disable(await get(id));
      live.closeToken(id, "TOKEN_DISABLED", "the token was revoked");
    },

    /**
     * The token and its owner for a presented secret, checked in the
     * handshake's order: unknown (AUTH_FAILED), revoked (TOKEN_DISABLED).
     */
    async authenticate(secret: string): Promise<{ token: TokenRow; user: UserRow }> {
      const found = await identify(secret);
      if (!found) throw new AppError("AUTH_FAILED", "the token is not valid");
      if (!found.token.enabled) throw new AppError("TOKEN_DISABLED", "the token has been revoked");
      return found;
    },

    identify,

    /**
     * Notes the token's use now. `firstUse`: the caller saw it never used
     * (last_used null), so this may be its first use: written only if no
     * other use was noted meanwhile, with token.first_use in the same
     * transaction.
     */
    async touch(id: number, firstUse?: { address: string }): Promise<void> {
      const now = isoTimestamp(clock.now());
      if (firstUse) {
        const first = await store.transaction(async () => {
          const row = await store.get(store.db.update(tokens).set({ lastUsed: now }).where(and(eq(tokens.id, id), isNull(tokens.lastUsed))).returning());
          if (row) await emit({ type: "token.first_use", userId: row.userId, data: { user_id: row.userId, username: await usernameOf(row.userId), token_id: id, device_name: row.deviceName, address: firstUse.address } });
          return row;
        });
        if (first) return;
      }
      await store.run(store.db.update(tokens).set({ lastUsed: now }).where(eq(tokens.id, id)));
    },
  };
}
