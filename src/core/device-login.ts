/**
 * Logging a device in through the browser: the OAuth 2.0 device
 * authorization grant (RFC 8628) as `burrow login` uses it.
 *
 * 1. The device asks for codes (start): a device code, 256 random bits it
 *    keeps to itself (only its SHA-256 is stored), and a user code of 8
 *    characters its user types or follows a link with.
 * 2. The user, signed in on the portal, looks the user code up (find), sees
 *    the device's name and where it asked from, and approves or denies it.
 *    Wrong codes count against the user and the network (the throttle;
 *    each look-up is reserved before the code is looked up and counts as
 *    wrong until it is found, so a burst cannot outrun the count): 8
 *    characters from 20 are 2.6e10 codes, and 10 tries per 15 minutes
 *    leave guessing hopeless.
 * 3. The device polls with its device code (poll), no faster than the
 *    interval; once approved, the poll makes the token and the row goes:
 *    the token is given once, to the device that holds the device code.
 *
 * A code is valid 10 minutes (--device-code-ttl). `max_devices` is checked at approval and
 * again when the token is made.
 *
 * What one client may do is counted by its network, as basic auth counts
 * guesses (http/addresses.ts clientKey): an IPv4 address, or an IPv6 /64,
 * which one host may send from all of. A network asks for 30 codes in 15
 * minutes, and holds at most PENDING_PER_NETWORK of the MAX_PENDING_CODES
 * that may wait at once: one network cannot fill the table and starve the
 * others.
 */
import { and, count, eq, lt } from "drizzle-orm";
import type { DeviceCodeRow, TokenRow, UserRow } from "../db/schema.ts";
import type { Store } from "../db/store.ts";
import { isoTimestamp, type Clock } from "./clock.ts";
import { AppError, badRequest } from "./errors.ts";
import { randomKey, sha256Hex } from "./secrets.ts";
import { clientKey } from "../http/addresses.ts";
import { NetworkShares } from "./network-shares.ts";
import { reserveEachInTurn, Throttle } from "./throttle.ts";
import type { Tokens } from "./tokens.ts";

/** RFC 8628 §6.1's example alphabet: consonants only (no words), none that looks like another (no 0/O, 1/I). */
export const USER_CODE_ALPHABET = "BCDFGHJKLMNPQRSTVWXZ";
export const USER_CODE_LENGTH = 8;
export const DEVICE_CODE_TTL_MS = 10 * 60 * 1000;
/** The poll interval a device starts with; each slow_down adds SLOW_DOWN_S (RFC 8628 §3.5). */
export const POLL_INTERVAL_S = 5;
const SLOW_DOWN_S = 5;
/** Codes waiting for approval at most, over every address: a flood cannot fill the database. */
export const MAX_PENDING_CODES = 10_000;
/** Wrong user codes one user, or one network, may type before being locked out a while. */
export const WRONG_CODES_ALLOWED = 10;
/** Codes one network may ask for within 15 minutes before it waits a minute (doubling up to 15). */
export const CODES_PER_ADDRESS = 30;
/** Codes one network may have waiting at once (on one node): its share of MAX_PENDING_CODES. */
export const PENDING_PER_NETWORK = 30;

/** The RFC's answers to a poll that gives no token yet (§3.5); invalid_grant for a device code that never was. */
export type PollRefusal = "authorization_pending" | "slow_down" | "access_denied" | "expired_token" | "invalid_grant";

export type PollAnswer =
  | { kind: "token"; secret: string; token: TokenRow; user: UserRow }
  | { kind: "wait"; error: PollRefusal; description: string };

/** What the user who approves sees of a device asking. */
export interface PendingDevice {
  userCode: string;
  deviceName: string;
  address: string;
  createdAt: string;
  expiresAt: string;
}

export type DeviceLogin = ReturnType<typeof createDeviceLogin>;

/** "wdjb-mjht", "WDJB MJHT", "wdjbmjht" -> "WDJBMJHT"; undefined when it cannot be a code. */
export function normalizeUserCode(raw: unknown): string | undefined {
  if (typeof raw !== "string" || raw.length > 32) return undefined;
  const code = raw.replace(/[\s-]/g, "").toUpperCase();
  if (code.length !== USER_CODE_LENGTH) return undefined;
  for (const c of code) if (!USER_CODE_ALPHABET.includes(c)) return undefined;
  return code;
}

/** "WDJBMJHT" -> "WDJB-MJHT", as the code is shown. */
export const showUserCode = (code: string) => `${code.slice(0, 4)}-${code.slice(4)}`;

function newUserCode(): string {
  // rejection sampling: 256 is not a multiple of 20, and a modulo would favour the first letters
  const out: string[] = [];
  const limit = 256 - (256 % USER_CODE_ALPHABET.length);
  while (out.length < USER_CODE_LENGTH) {
    for (const b of crypto.getRandomValues(new Uint8Array(16))) {
      if (b < limit && out.length < USER_CODE_LENGTH) out.push(USER_CODE_ALPHABET[b % USER_CODE_ALPHABET.length]!);
    }
  }
  return out.join("");
}

export function createDeviceLogin(store: Store, clock: Clock, tokens: Tokens, ttlMs = DEVICE_CODE_TTL_MS) {
  const { deviceCodes, users } = store.tables;
  const now = () => clock.now().getTime();
  // wrong codes, by user and by network: the same rules as a throttle of logins, a longer allowance
  const rules = { allowance: WRONG_CODES_ALLOWED, forgetAfterMs: 15 * 60_000, firstLockMs: 60_000, maxLockMs: 15 * 60_000, maxKeys: 10_000 };
  const wrongByUser = new Throttle(rules, now);
  const wrongByNetwork = new Throttle(rules, now);
  // codes asked for, by network, and those waiting: one network cannot take the whole of MAX_PENDING_CODES
  const starts = new Throttle({ ...rules, allowance: CODES_PER_ADDRESS }, now);
  const waitingByNetwork = new NetworkShares(PENDING_PER_NETWORK, MAX_PENDING_CODES, now);
  /** A code's row is gone (its token given, denied, expired): its network's share has room again. */
  const gone = (row: DeviceCodeRow) => waitingByNetwork.giveBack(clientKey(row.address), row.deviceCodeHash);

  const expired = (row: DeviceCodeRow) => Date.parse(row.expiresAt) <= now();
  const pendingView = (row: DeviceCodeRow): PendingDevice => ({ userCode: row.userCode, deviceName: row.deviceName, address: row.address, createdAt: row.createdAt, expiresAt: row.expiresAt });

  /** Deletes codes past their life, so the table does not grow for ever. */
  async function sweep(): Promise<void> {
    waitingByNetwork.sweep();
    await store.run(store.db.delete(deviceCodes).where(lt(deviceCodes.expiresAt, isoTimestamp(clock.now()))));
  }

  const tooMany = (retryAt: number, why: string) => {
    const retry = Math.max(1, Math.ceil((retryAt - now()) / 1000));
    return new AppError("TOO_MANY_REQUESTS", `${why}: try again in ${retry} s`, { "Retry-After": String(retry) });
  };

  /** The pending, unexpired row of a user code typed by a signed-in user; a wrong one counts against them and their network. */
  async function pendingByUserCode(raw: unknown, user: UserRow, address: string): Promise<DeviceCodeRow> {
    const turn = await reserveEachInTurn([
      [wrongByUser, String(user.id)],
      [wrongByNetwork, clientKey(address)],
    ]);
    if (!turn.ticket) throw tooMany(turn.retryAt, "too many wrong codes");
    using attempt = turn.ticket;
    const code = normalizeUserCode(raw);
    const row = code === undefined ? undefined : await store.get(store.db.select().from(deviceCodes).where(eq(deviceCodes.userCode, code)));
    if (!row || row.status !== "pending" || expired(row)) {
      attempt.failed();
      throw new AppError("NOT_FOUND", "no device is waiting with this code: check it, or run `burrow login` again (a code is valid 10 minutes and is used once)");
    }
    attempt.succeeded();
    return row;
  }

  /** Decides a pending code, unless another decision got there first. */
  async function decide(row: DeviceCodeRow, user: UserRow, status: "approved" | "denied"): Promise<void> {
    const changed = await store.all(
      store.db
        .update(deviceCodes)
        .set({ status, userId: user.id })
        .where(and(eq(deviceCodes.id, row.id), eq(deviceCodes.status, "pending")))
        .returning({ id: deviceCodes.id }),
    );
    if (changed.length === 0) throw new AppError("NOT_FOUND", "this code was approved or denied already");
  }

  /** The user has max_devices enabled tokens already: no other device may be added. */
  async function assertRoomForDevice(user: UserRow): Promise<void> {
    if (user.maxDevices <= 0) return;
    const held = (await tokens.listForUser(user.id)).filter((t) => t.enabled).length;
    if (held >= user.maxDevices) {
      throw new AppError("TOO_MANY_DEVICES", `you have ${held} of your ${user.maxDevices} devices already: revoke one you no longer use, then run \`burrow login\` again`);
    }
  }

  return {
    /** Codes for a device that asks; 429 when its network asked too often, or holds its share, or too many wait already. */
    async start(deviceName: string, address: string): Promise<{ deviceCode: string; userCode: string; expiresInS: number; intervalS: number }> {
      const network = clientKey(address);
      const until = starts.take(network);
      if (until > 0) throw tooMany(until, "too many device logins from this address");
      const deviceCode = randomKey();
      const deviceCodeHash = sha256Hex(deviceCode);
      const created = clock.now();
      const expiresAt = created.getTime() + ttlMs;
      // the network's share first: one that holds it is refused whatever room the table has left
      if (!waitingByNetwork.take(network, deviceCodeHash, expiresAt)) {
        const minutes = Math.max(1, Math.round(ttlMs / 60_000));
        throw new AppError("TOO_MANY_REQUESTS", `too many device logins are waiting from this address: use them or let them expire (${minutes} min)`, { "Retry-After": "60" });
      }
      try {
        const waiting = async () => (await store.get(store.db.select({ n: count() }).from(deviceCodes)))?.n ?? 0;
        // expired rows count until swept: sweep them before saying the table is full
        if ((await waiting()) >= MAX_PENDING_CODES) await sweep();
        if ((await waiting()) >= MAX_PENDING_CODES) {
          throw new AppError("TOO_MANY_REQUESTS", "too many device logins are waiting: try again in a minute", { "Retry-After": "60" });
        }
        // a user code is unique among those stored: another try on the (rare) clash
        for (let attempt = 0; ; attempt++) {
          const userCode = newUserCode();
          try {
            await store.run(
              store.db.insert(deviceCodes).values({
                deviceCodeHash,
                userCode,
                deviceName,
                address,
                intervalS: POLL_INTERVAL_S,
                createdAt: isoTimestamp(created),
                expiresAt: isoTimestamp(new Date(expiresAt)),
              }),
            );
            return { deviceCode, userCode, expiresInS: Math.round(ttlMs / 1000), intervalS: POLL_INTERVAL_S };
          } catch (err) {
            if (attempt >= 3 || !/device_codes_user_code|unique/i.test(String(err))) throw err;
          }
        }
      } catch (err) {
        waitingByNetwork.giveBack(network, deviceCodeHash);
        throw err;
      }
    },

    /** The device waiting with this user code, for its user to see before deciding. */
    async find(userCode: unknown, user: UserRow, address: string): Promise<PendingDevice> {
      return pendingView(await pendingByUserCode(userCode, user, address));
    },

    async approve(userCode: unknown, user: UserRow, address: string): Promise<PendingDevice> {
      const row = await pendingByUserCode(userCode, user, address);
      await assertRoomForDevice(user);
      await decide(row, user, "approved");
      return pendingView(row);
    },

    async deny(userCode: unknown, user: UserRow, address: string): Promise<PendingDevice> {
      const row = await pendingByUserCode(userCode, user, address);
      await decide(row, user, "denied");
      return pendingView(row);
    },

    /** A device's poll (RFC 8628 §3.4): its token once approved, else why not yet or not at all. */
    async poll(deviceCode: unknown): Promise<PollAnswer> {
      if (typeof deviceCode !== "string" || deviceCode === "" || deviceCode.length > 200) throw badRequest("device_code must be the device code");
      const hash = sha256Hex(deviceCode);
      const row = await store.get(store.db.select().from(deviceCodes).where(eq(deviceCodes.deviceCodeHash, hash)));
      if (!row) return { kind: "wait", error: "invalid_grant", description: "unknown device code (it was used already, or never given)" };
      if (expired(row)) {
        await store.run(store.db.delete(deviceCodes).where(eq(deviceCodes.id, row.id)));
        gone(row);
        return { kind: "wait", error: "expired_token", description: "the code expired before it was approved: run `burrow login` again" };
      }
      const t = now();
      const last = row.lastPollAt === null ? undefined : Date.parse(row.lastPollAt);
      // a little slack: a device that waits the interval exactly must not be told to slow down by a clock's jitter
      if (last !== undefined && t - last < row.intervalS * 1000 - 500) {
        await store.run(store.db.update(deviceCodes).set({ intervalS: row.intervalS + SLOW_DOWN_S, lastPollAt: isoTimestamp(new Date(t)) }).where(eq(deviceCodes.id, row.id)));
        return { kind: "wait", error: "slow_down", description: `poll every ${row.intervalS + SLOW_DOWN_S} s at most` };
      }
      if (row.status === "pending") {
        await store.run(store.db.update(deviceCodes).set({ lastPollAt: isoTimestamp(new Date(t)) }).where(eq(deviceCodes.id, row.id)));
        return { kind: "wait", error: "authorization_pending", description: "waiting for the user to approve the code" };
      }
      if (row.status === "denied" || row.userId === null) {
        await store.run(store.db.delete(deviceCodes).where(eq(deviceCodes.id, row.id)));
        gone(row);
        return { kind: "wait", error: "access_denied", description: "the user denied this device" };
      }
      // approved: the row goes in the transaction that makes the token, so two polls cannot both take one
      return store.transaction(async () => {
        const taken = await store.all(store.db.delete(deviceCodes).where(eq(deviceCodes.id, row.id)).returning({ id: deviceCodes.id }));
        if (taken.length === 0) return { kind: "wait", error: "invalid_grant", description: "the token was given already" } as const;
        gone(row);
        const user = await store.get(store.db.select().from(users).where(eq(users.id, row.userId!)));
        if (!user || !user.enabled) return { kind: "wait", error: "access_denied", description: "the account is disabled" } as const;
        try {
          const { secret, row: token } = await tokens.generateWithinLimit(user, row.deviceName, "device-login");
          return { kind: "token", secret, token, user } as const;
        } catch (err) {
          if (err instanceof AppError && err.code === "TOO_MANY_DEVICES") return { kind: "wait", error: "access_denied", description: err.message } as const;
          throw err;
        }
      });
    },

    sweep,
  };
}
