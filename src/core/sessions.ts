/**
 * Admin sessions. The cookie carries 256 random bits; the database keeps only
 * their SHA-256. A session ends after 24 h without use or 7 days after login,
 * whichever comes first.
 */
import { eq, lt, or } from "drizzle-orm";
import type { UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError } from "./errors.ts";
import { randomKey, sha256Hex } from "./secrets.ts";

export const SESSION_IDLE_MS = 24 * 3600 * 1000;
export const SESSION_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** last_seen_at is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60 * 1000;

export type Sessions = ReturnType<typeof createSessions>;

export function createSessions(store: Store, clock: Clock) {
  const { sessions, users } = store.tables;
  const unauthorized = (why: string) => new AppError("UNAUTHORIZED", why);

  return {
    /** Starts a session and returns the cookie value. */
    async start(userId: number): Promise<string> {
      const key = randomKey();
      const now = isoTimestamp(clock.now());
      await store.run(store.db.insert(sessions).values({ idHash: sha256Hex(key), userId, createdAt: now, lastSeenAt: now }));
      return key;
    },

    async end(key: string): Promise<void> {
      await store.run(store.db.delete(sessions).where(eq(sessions.idHash, sha256Hex(key))));
    },

    /**
     * The admin behind a cookie: 401 when the session is missing, expired, or
     * its user is gone or disabled; 403 when the user is no longer an admin.
     */
    async resolve(key: string | undefined): Promise<UserRow> {
      if (!key) throw unauthorized("authentication required");
      const idHash = sha256Hex(key);
      const found = await store.get(
        store.db
          .select({ session: sessions, user: users })
          .from(sessions)
          .innerJoin(users, eq(sessions.userId, users.id))
          .where(eq(sessions.idHash, idHash)),
      );
      if (!found) throw unauthorized("session expired or invalid");
      const now = clock.now().getTime();
      const idleSince = Date.parse(found.session.lastSeenAt);
      const started = Date.parse(found.session.createdAt);
      if (now - idleSince > SESSION_IDLE_MS || now - started > SESSION_MAX_AGE_MS) {
        await store.run(store.db.delete(sessions).where(eq(sessions.idHash, idHash)));
        throw unauthorized("session expired");
      }
      if (!found.user.enabled) throw unauthorized("the account is disabled");
      if (found.user.role !== "admin") throw new AppError("FORBIDDEN", "administrator role required");
      if (now - idleSince > TOUCH_EVERY_MS) {
        await store.run(store.db.update(sessions).set({ lastSeenAt: isoTimestamp(clock.now()) }).where(eq(sessions.idHash, idHash)));
      }
      return found.user;
    },

    /** Deletes sessions past either limit, so the table does not grow for ever. */
    async sweep(): Promise<void> {
      const now = clock.now().getTime();
      await store.run(
        store.db
          .delete(sessions)
          .where(
            or(
              lt(sessions.lastSeenAt, isoTimestamp(new Date(now - SESSION_IDLE_MS))),
              lt(sessions.createdAt, isoTimestamp(new Date(now - SESSION_MAX_AGE_MS))),
            ),
          ),
      );
    },
  };
}
