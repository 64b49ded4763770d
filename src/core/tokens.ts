/**
 * Per-device access tokens. A secret is "brw_" + 43 base62 characters (256
 * bits); only its SHA-256 is kept, found by its first characters (lookup) and
 * compared in constant time. Revoking keeps the row, disabled.
 */
import { and, asc, count, eq } from "drizzle-orm";
import type { TokenRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import type { LiveTunnels } from "./live.ts";
import { findBySecret, newPrefixedSecret } from "./secrets.ts";

export const TOKEN_PREFIX = "brw_";

export type Tokens = ReturnType<typeof createTokens>;

export function createTokens(store: Store, clock: Clock, live: LiveTunnels) {
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
  async function generate(userId: number, deviceName: string): Promise<{ secret: string; row: TokenRow }> {
    const { secret, lookup, secretHash } = newPrefixedSecret(TOKEN_PREFIX);
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
    return { secret, row: row! };
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
    async generateWithinLimit(user: UserRow, deviceName: string): Promise<{ secret: string; row: TokenRow }> {
      return store.transaction(async () => {
        await store.lock(`tokens.user.${user.id}`); // two at once cannot both pass the count
        if (user.maxDevices > 0) {
          const held = (await store.get(store.db.select({ n: count() }).from(tokens).where(and(eq(tokens.userId, user.id), eq(tokens.enabled, true)))))?.n ?? 0;
          if (held >= user.maxDevices) {
            throw new AppError("TOO_MANY_DEVICES", `you have ${held} of your ${user.maxDevices} devices already: revoke one you no longer use first`);
          }
        }
        return generate(user.id, deviceName);
      });
    },

    /** Revokes a token of this user's only: another's is as unknown as one that does not exist (404). */
    async revokeOwn(userId: number, id: number): Promise<TokenRow> {
      const row = await store.get(store.db.select().from(tokens).where(and(eq(tokens.id, id), eq(tokens.userId, userId))));
      if (!row) throw notFound("token");
      await store.run(store.db.update(tokens).set({ enabled: false }).where(eq(tokens.id, id)));
      live.closeToken(id, "TOKEN_DISABLED", "the token was revoked");
      return row;
    },

    /** Idempotent: revoking a revoked token answers the same. */
    async revoke(id: number): Promise<void> {
      await get(id);
      await store.run(store.db.update(tokens).set({ enabled: false }).where(eq(tokens.id, id)));
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

    async touch(id: number): Promise<void> {
      await store.run(store.db.update(tokens).set({ lastUsed: isoTimestamp(clock.now()) }).where(eq(tokens.id, id)));
    },
  };
}
