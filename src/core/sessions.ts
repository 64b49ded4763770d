/**
 * Sessions of the admin API and panel ("admin") and of the portal, the users'
 * own pages on the apex ("portal"). The cookie carries 256 random bits; the
 * database keeps only their SHA-256. A session ends after 24 h without use or
 * 7 days after login, whichever comes first, and when its user is disabled,
 * gets a new password (all but the session that set it) or a new role
 * (admin sessions; users.ts). Every request reads its session here, never
 * from a copy, so on every node of a cluster an ended session is refused at
 * once. A session is of one kind for good: a portal session's key sent to
 * the admin API is no session there (cookies ignore ports, so a browser may
 * well send it), whoever it is of.
 */
import { and, eq, lt, or } from "drizzle-orm";
import type { UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, type ErrorCode } from "./errors.ts";
import { randomKey, sha256Hex } from "./secrets.ts";

export const SESSION_IDLE_MS = 24 * 3600 * 1000;
export const SESSION_MAX_AGE_MS = 7 * 24 * 3600 * 1000;
/** last_seen_at is written at most this often, not on every request. */
const TOUCH_EVERY_MS = 60 * 1000;

export type Sessions = ReturnType<typeof createSessions>;
export type SessionKind = "admin" | "portal";

export function createSessions(store: Store, clock: Clock) {
  const { sessions, users } = store.tables;
  const unauthorized = (why: string, code: ErrorCode = "UNAUTHORIZED") => new AppError(code, why);

  async function find(key: string | undefined, kind: SessionKind): Promise<UserRow> {
    if (!key) throw unauthorized("authentication required");
    const idHash = sha256Hex(key);
    const found = await store.get(
      store.db
        .select({ session: sessions, user: users })
        .from(sessions)
        .innerJoin(users, eq(sessions.userId, users.id))
        .where(and(eq(sessions.idHash, idHash), eq(sessions.kind, kind))),
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
    if (now - idleSince > TOUCH_EVERY_MS) {
      await store.run(store.db.update(sessions).set({ lastSeenAt: isoTimestamp(clock.now()) }).where(eq(sessions.idHash, idHash)));
    }
    return found.user;
  }

  return {
    /** Starts a session and returns the cookie value. */
    async start(userId: number, kind: SessionKind = "admin"): Promise<string> {
      const key = randomKey();
      const now = isoTimestamp(clock.now());
      await store.run(store.db.insert(sessions).values({ idHash: sha256Hex(key), userId, createdAt: now, lastSeenAt: now, kind }));
      return key;
    },

    async end(key: string): Promise<void> {
      await store.run(store.db.delete(sessions).where(eq(sessions.idHash, sha256Hex(key))));
    },

    /**
     * The admin behind a cookie: 401 when the session is missing, expired, of
     * the portal, or its user is gone or disabled; 403 when the user is no
     * longer an admin.
     */
    async resolve(key: string | undefined): Promise<UserRow> {
      const user = await find(key, "admin");
      if (user.role !== "admin") throw new AppError("FORBIDDEN", "administrator role required");
      return user;
    },

    /** The user behind a portal cookie, whatever their role: 401 as resolve() says. */
    resolvePortal: (key: string | undefined): Promise<UserRow> => find(key, "portal"),

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
