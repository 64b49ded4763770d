/**
 * Invitations: an admin makes a link; whoever opens it on the portal chooses
 * a username and a password (or signs in with the company) and becomes a
 * user with the settings the invitation carries. The link's secret is
 * "bri_" + 43 base62 characters; only its SHA-256 is kept, found by its
 * first characters and compared in constant time, as tokens are. An
 * invitation is used once: the row is marked used in the transaction that
 * makes the user, so two people opening one link cannot both get in.
 */
import { desc, eq, isNull, and } from "drizzle-orm";
import type { InvitationRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import type { Role, TrafficPeriod } from "../validate/fields.ts";
import { clientKey } from "../http/addresses.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, notFound } from "./errors.ts";
import { findBySecret, newPrefixedSecret } from "./secrets.ts";
import { Throttle } from "./throttle.ts";
import type { Users } from "./users.ts";

export const INVITATION_PREFIX = "bri_";
export const DEFAULT_INVITATION_HOURS = 7 * 24;
export const MAX_INVITATION_HOURS = 30 * 24;
/** Wrong invitation links one address may present before it waits a minute (doubling to 15). */
const WRONG_LINKS_ALLOWED = 10;

/** What the new user gets: every field a user has that an invitation may set, defaults filled in when it is made. */
export interface InvitedSettings {
  role: Role;
  maxTunnels: number;
  allowedProtocols: string;
  trafficLimit: number;
  trafficPeriod: TrafficPeriod;
  maxDevices: number;
  skipWarning: boolean;
  canUseProxy: boolean;
}

/** A user's defaults, as the users table has them: what an invitation gives unless the admin says otherwise. */
export const USER_DEFAULTS: InvitedSettings = {
  role: "user",
  maxTunnels: 0,
  allowedProtocols: "http,tcp",
  trafficLimit: 0,
  trafficPeriod: "monthly",
  maxDevices: 0,
  skipWarning: false,
  canUseProxy: true,
};

export type InvitationStatus = "pending" | "used" | "expired";

export interface Invitation {
  id: number;
  settings: InvitedSettings;
  note: string;
  createdBy: number | null;
  createdAt: string;
  expiresAt: string;
  usedAt: string | null;
  usedBy: number | null;
  usedUsername: string | null;
  status: InvitationStatus;
}

export type Invitations = ReturnType<typeof createInvitations>;

export function createInvitations(store: Store, clock: Clock, users: Users) {
  const { invitations } = store.tables;
  const now = () => clock.now().getTime();
  const wrongLinks = new Throttle({ allowance: WRONG_LINKS_ALLOWED, forgetAfterMs: 15 * 60_000, firstLockMs: 60_000, maxLockMs: 15 * 60_000, maxKeys: 10_000 }, now);

  const view = (row: InvitationRow): Invitation => ({
    id: row.id,
    settings: { ...USER_DEFAULTS, ...(JSON.parse(row.settings) as Partial<InvitedSettings>) },
    note: row.note,
    createdBy: row.createdBy,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    usedAt: row.usedAt,
    usedBy: row.usedBy,
    usedUsername: row.usedUsername,
    status: row.usedAt !== null ? "used" : Date.parse(row.expiresAt) <= now() ? "expired" : "pending",
  });

  const invalid = () => new AppError("INVITATION_INVALID", "this invitation link is not valid: it may have been used, have expired or been withdrawn. Ask for a new one.");

  /** The pending invitation a link's secret is; a wrong one counts against the address. */
  async function pending(secret: unknown, address: string): Promise<InvitationRow> {
    // reserved before the lookup, counted as a wrong link until it is found: a burst cannot outrun the count
    // an IPv6 client is counted by its /64, as one IPv4 address (http/addresses.ts)
    const turn = await wrongLinks.reserveInTurn(clientKey(address));
    if (!turn.ticket) {
      const retry = Math.max(1, Math.ceil((turn.retryAt - now()) / 1000));
      throw new AppError("TOO_MANY_REQUESTS", `too many wrong invitation links: try again in ${retry} s`, { "Retry-After": String(retry) });
    }
    using attempt = turn.ticket;
    const row = await findBySecret(INVITATION_PREFIX, secret, (lookup) => store.get(store.db.select().from(invitations).where(eq(invitations.lookup, lookup))), (r) => r.secretHash);
    if (!row) {
      attempt.failed();
      throw invalid();
    }
    attempt.succeeded();
    if (row.usedAt !== null || Date.parse(row.expiresAt) <= now()) throw invalid();
    return row;
  }

  return {
    /** Makes an invitation; the returned secret (the link's) exists nowhere else. */
    async create(settings: Partial<InvitedSettings>, options: { hours: number; note: string; createdBy?: number }): Promise<{ secret: string; invitation: Invitation }> {
      const { secret, lookup, secretHash } = newPrefixedSecret(INVITATION_PREFIX);
      const created = clock.now();
      const row = await store.get(
        store.db
          .insert(invitations)
          .values({
            lookup,
            secretHash,
            settings: JSON.stringify({ ...USER_DEFAULTS, ...settings }),
            note: options.note,
            createdBy: options.createdBy ?? null,
            createdAt: isoTimestamp(created),
            expiresAt: isoTimestamp(new Date(created.getTime() + options.hours * 3600_000)),
          })
          .returning(),
      );
      return { secret, invitation: view(row!) };
    },

    list: async (): Promise<Invitation[]> => (await store.all(store.db.select().from(invitations).orderBy(desc(invitations.id)))).map(view),

    async get(id: number): Promise<Invitation> {
      const row = await store.get(store.db.select().from(invitations).where(eq(invitations.id, id)));
      if (!row) throw notFound("invitation");
      return view(row);
    },

    /** Withdraws an invitation (a used one's record goes too; its user stays). */
    async remove(id: number): Promise<Invitation> {
      const row = await store.get(store.db.delete(invitations).where(eq(invitations.id, id)).returning());
      if (!row) throw notFound("invitation");
      return view(row);
    },

    /** What a pending invitation offers, for its page to show before the invitee chooses a name. */
    describe: async (secret: unknown, address: string): Promise<Invitation> => view(await pending(secret, address)),

    /**
     * Uses the invitation: makes the user (a password, or none for a user of
     * the company's sign-in, with `oidcSubject`) with its settings.
     */
    async accept(secret: unknown, address: string, who: { username: string; password?: string; oidcSubject?: string }): Promise<{ user: UserRow; invitation: Invitation }> {
      const row = await pending(secret, address);
      const settings = view(row).settings;
      return store.transaction(async () => {
        const taken = await store.all(
          store.db
            .update(invitations)
            .set({ usedAt: isoTimestamp(clock.now()), usedUsername: who.username })
            .where(and(eq(invitations.id, row.id), isNull(invitations.usedAt)))
            .returning({ id: invitations.id }),
        );
        if (taken.length === 0) throw invalid();
        const user = await users.create({ ...settings, username: who.username, password: who.password, oidcSubject: who.oidcSubject });
        await store.run(store.db.update(invitations).set({ usedBy: user.id }).where(eq(invitations.id, row.id)));
        return { user, invitation: view({ ...row, usedAt: isoTimestamp(clock.now()), usedBy: user.id, usedUsername: who.username }) };
      });
    },
  };
}
