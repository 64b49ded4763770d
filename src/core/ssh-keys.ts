/**
 * Users' SSH public keys: each is a device of its user at the SSH gateway,
 * as a token is for the agent (devices.ts: a key's device id is its id
 * negated). A key belongs to one user (its fingerprint is unique, so the key
 * alone says who connects); removing it ends the SSH sessions it opened,
 * as revoking a token ends the agent's. A key a device added with its
 * token (`burrow keys add`) lives no longer than that token: a stolen
 * token cannot leave a key behind that outlives its revocation.
 */
import { and, asc, count, eq } from "drizzle-orm";
import type { SshKeyRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { keyDevice } from "./device-ids.ts";
import { AppError, badRequest, notFound } from "./errors.ts";
import type { LiveTunnels } from "./live.ts";
import { readPublicKey } from "./ssh-public-key.ts";

/** Keys one user may hold: far more than anyone has machines, and a bound on what one account can store. */
export const MAX_KEYS_PER_USER = 100;
/** A key's name: what the lists show it by. */
const MAX_NAME_CHARS = 100;

export type SshKeys = ReturnType<typeof createSshKeys>;

export function createSshKeys(store: Store, clock: Clock, live: LiveTunnels) {
  const { sshKeys, tokens, users } = store.tables;

  async function get(id: number): Promise<SshKeyRow> {
    const row = await store.get(store.db.select().from(sshKeys).where(eq(sshKeys.id, id)));
    if (!row) throw notFound("SSH key");
    return row;
  }

  /** Deletes a key and ends what it has open: its sessions are closed with KEY_REVOKED. */
  async function remove(row: SshKeyRow): Promise<void> {
    await store.run(store.db.delete(sshKeys).where(eq(sshKeys.id, row.id)));
    live.closeToken(keyDevice(row.id), "KEY_REVOKED", "the SSH key was removed");
  }

  return {
    get,

    listForUser: (userId: number) => store.all(store.db.select().from(sshKeys).where(eq(sshKeys.userId, userId)).orderBy(asc(sshKeys.id))),

    /**
     * Adds `text` (one line of a .pub file) to the user's keys, named `name`
     * (default: the key's comment). BAD_REQUEST for a key that is not one
     * burrow takes; SSH_KEY_TAKEN when any user has it already (who is not said).
     */
    async add(user: UserRow, text: string, name?: string, opts: { withinLimit?: boolean; addedByToken?: number } = {}): Promise<SshKeyRow> {
      const key = readPublicKey(text);
      if (key instanceof AppError) throw key;
      const named = (name ?? key.comment ?? `${key.type} key`).trim().slice(0, MAX_NAME_CHARS);
      if (named === "") throw badRequest("name: must not be empty");
      return store.transaction(async () => {
        // two at once cannot both pass the checks
        await store.lock("ssh_keys");
        if (await store.get(store.db.select({ id: sshKeys.id }).from(sshKeys).where(eq(sshKeys.fingerprint, key.fingerprint)))) {
          throw new AppError("SSH_KEY_TAKEN", `this key (${key.fingerprint}) is registered already; each key belongs to one user`);
        }
        const held = await store.all(store.db.select({ id: sshKeys.id }).from(sshKeys).where(eq(sshKeys.userId, user.id)));
        if (held.length >= MAX_KEYS_PER_USER) throw badRequest(`key: user '${user.username}' has ${MAX_KEYS_PER_USER} SSH keys already, the most one user may hold`);
        if (opts.withinLimit && user.maxDevices > 0) {
          // a user adding their own: held to max_devices as a token they make is, counting both
          const devices = held.length + ((await store.get(store.db.select({ n: count() }).from(tokens).where(and(eq(tokens.userId, user.id), eq(tokens.enabled, true)))))?.n ?? 0);
          if (devices >= user.maxDevices) throw new AppError("TOO_MANY_DEVICES", `you have ${devices} of your ${user.maxDevices} devices already (tokens and SSH keys): remove one you no longer use first`);
        }
        const row = await store.get(
          store.db
            .insert(sshKeys)
            .values({ userId: user.id, name: named, publicKey: key.line, fingerprint: key.fingerprint, addedByToken: opts.addedByToken ?? null, createdAt: isoTimestamp(clock.now()) })
            .returning(),
        );
        return row!;
      });
    },

    /** Deletes a key; its sessions end (KEY_REVOKED). */
    async remove(id: number): Promise<SshKeyRow> {
      const row = await get(id);
      await remove(row);
      return row;
    },

    /** Deletes a key of this user's only: another's is as unknown as one that does not exist (404). */
    async removeOwn(userId: number, id: number): Promise<SshKeyRow> {
      const row = await store.get(store.db.select().from(sshKeys).where(and(eq(sshKeys.id, id), eq(sshKeys.userId, userId))));
      if (!row) throw notFound("SSH key");
      await remove(row);
      return row;
    },

    /** The token `tokenId` was revoked: the keys added with it (`burrow keys add`) go too, their sessions closed. */
    async removeAddedBy(tokenId: number): Promise<void> {
      for (const row of await store.all(store.db.select().from(sshKeys).where(eq(sshKeys.addedByToken, tokenId)))) await remove(row);
    },

    /** The key with this fingerprint and its owner, whatever the owner's state; undefined when no user has it. */
    async find(fingerprint: string): Promise<{ key: SshKeyRow; user: UserRow } | undefined> {
      return store.get(store.db.select({ key: sshKeys, user: users }).from(sshKeys).innerJoin(users, eq(sshKeys.userId, users.id)).where(eq(sshKeys.fingerprint, fingerprint)));
    },

    /** The key and its owner as a device of the handshake's rules: KEY_REVOKED when it was removed meanwhile. */
    async authenticate(id: number): Promise<{ key: SshKeyRow; user: UserRow }> {
      const found = await store.get(store.db.select({ key: sshKeys, user: users }).from(sshKeys).innerJoin(users, eq(sshKeys.userId, users.id)).where(eq(sshKeys.id, id)));
      if (!found) throw new AppError("KEY_REVOKED", "the SSH key was removed");
      return found;
    },

    async touch(id: number): Promise<void> {
      await store.run(store.db.update(sshKeys).set({ lastUsed: isoTimestamp(clock.now()) }).where(eq(sshKeys.id, id)));
    },
  };
}
