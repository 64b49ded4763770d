/**
 * How a client signs in at the SSH gateway: by public key only. "none" is
 * answered with the one method there is; a password, keyboard-interactive
 * or host-based attempt is refused unheard. A key must be one of a user's
 * (core/ssh-keys.ts, by its fingerprint) and its signature must verify
 * with the key as stored; the key decides who connects, and the SSH user
 * name is not read.
 *
 * Sign-ins are held to the agents' handshake throttle (edge/handshake-guard.ts,
 * --handshake-limit), shared with the agents' ports and counted per
 * address (an IPv6 client by its /64): a connection's place is taken at its
 * first attempt, before any key is looked up, and a connection that ends
 * without signing in counts as one failed handshake, however many keys it
 * tried (a person's agent may offer several before the one that is theirs).
 * A locked address is turned away before its key is read.
 */
import { utils, type AuthContext, type Connection, type PublicKeyAuthContext } from "ssh2";
import type { HandshakeTicket } from "../core/handshake-throttle.ts";
import type { Core } from "../core/index.ts";
import { fingerprintOf } from "../core/ssh-public-key.ts";
import type { SshKeyRow, UserRow } from "../db/schema.ts";
import type { HandshakeGuard } from "../edge/handshake-guard.ts";
import { clientKey } from "../http/addresses.ts";
import { quietWarnings } from "../log.ts";
import { disconnectWith, DISCONNECT } from "./ssh2-extras.ts";

/** A sign-in that could not be judged (the database down) is logged at most this often. */
const failures = quietWarnings(10_000);

/** Keys (or other attempts) one connection may try before it is cut. */
export const MAX_SIGN_IN_ATTEMPTS = 10;

/** The result a connection that never signed in is counted with (a failure, as a wrong token is). */
const FAILED = "AUTH_FAILED";

export interface SignedIn {
  key: SshKeyRow;
  user: UserRow;
}

export class SignIn {
  private ticket?: HandshakeTicket;
  private turn?: Promise<HandshakeTicket | undefined>;
  private attempts = 0;
  /** What the connection signed in as, once it has. */
  signedIn?: SignedIn;
  /** The last key that was not one of ours, for the audit. */
  private unknownKey?: string;

  constructor(
    private readonly client: Connection,
    private readonly core: Core,
    private readonly guard: HandshakeGuard | undefined,
    private readonly address: string,
  ) {}

  /** An authentication request (ssh2 hands them over one at a time). */
  attempt(ctx: AuthContext): void {
    this.judge(ctx).catch((err) => {
      // the database, most likely: this attempt is refused, and the connection may try again
      ctx.reject(["publickey"]);
      failures("failed", "ssh sign-in not judged", { address: this.address, err: String(err) });
    });
  }

  /** The connection ended: one that tried and never signed in is one failure. */
  ended(): void {
    const ticket = this.ticket;
    this.ticket = undefined;
    if (!ticket) return;
    if (this.signedIn) return ticket.ended("READY");
    ticket.ended(FAILED);
    void this.core.audit.repeated({ action: "ssh.refused", address: this.address, outcome: "refused", code: FAILED, ...(this.unknownKey ? { key: this.unknownKey } : {}) });
  }

  private async judge(ctx: AuthContext): Promise<void> {
    if (ctx.method === "none") return ctx.reject(["publickey"]);
    if (++this.attempts > MAX_SIGN_IN_ATTEMPTS) return disconnectWith(this.client, DISCONNECT.NO_MORE_AUTH_METHODS_AVAILABLE, `burrow: too many sign-in attempts on one connection (${MAX_SIGN_IN_ATTEMPTS})`);
    // its place in the throttle is taken before anything of it is looked at
    const ticket = await this.place();
    if (!ticket) return;
    if (ctx.method !== "publickey") return ctx.reject(["publickey"]);
    const found = await this.core.sshKeys.find(fingerprintOf(ctx.key.data));
    if (!found) {
      this.unknownKey = fingerprintOf(ctx.key.data);
      return ctx.reject(["publickey"]);
    }
    // a key the client only asks about is answered: it is one of ours, sign with it
    if (!ctx.signature) return ctx.accept();
    if (!verifies(found.key, ctx)) return ctx.reject(["publickey"]);
    if (!found.user.enabled) {
      // a disabled user is told so, not left guessing at a refused key; not a failure of the throttle's
      this.ticket = undefined;
      ticket.ended("USER_DISABLED");
      return disconnectWith(this.client, DISCONNECT.BY_APPLICATION, `burrow: USER_DISABLED: user '${found.user.username}' is disabled`);
    }
    this.signedIn = found;
    ctx.accept();
  }

  /** The connection's place in the throttle, taken once; undefined when the address is locked (it is told, and cut). */
  private place(): Promise<HandshakeTicket | undefined> {
    this.turn ??= (async () => {
      if (!this.guard) return (this.ticket = { ended() {}, [Symbol.dispose]() {} });
      const r = await this.guard.reserve(clientKey(this.address));
      if (r.refusal) {
        void this.core.audit.repeated({ action: "ssh.refused", address: this.address, outcome: "refused", code: r.refusal.code });
        disconnectWith(this.client, DISCONNECT.TOO_MANY_CONNECTIONS, `burrow: RATE_LIMITED: ${r.refusal.message}`);
        return undefined;
      }
      return (this.ticket = r.ticket);
    })();
    return this.turn;
  }
}

/** Whether the signature verifies with the key as stored (the presented key's bytes are the stored key's: the same fingerprint). */
function verifies(key: SshKeyRow, ctx: PublicKeyAuthContext): boolean {
  const parsed = utils.parseKey(key.publicKey);
  const stored = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!stored || stored instanceof Error || !ctx.signature || !ctx.blob) return false;
  return stored.verify(ctx.blob, ctx.signature, ctx.hashAlgo) === true;
}
