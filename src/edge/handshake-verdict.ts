/**
 * A handshake's verdict, kept once: counted for the metrics (READY, MOVE
 * or the refusal's code), given to the handshake throttle (a failure
 * counts against the address; any other result gives its place back),
 * written to the audit log when refused, and sent to the agent as an
 * ERROR. agent-handshake.ts decides; this file keeps the books.
 */
import type { AppError } from "../core/errors.ts";
import type { HandshakeTicket } from "../core/handshake-throttle.ts";
import { databaseUnavailable, reportUnavailable, UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { WireError } from "../protocol/wire.ts";
import type { AgentSide } from "./agent-context.ts";

export class HandshakeVerdict {
  /** A HELLO came, so the connection's end before READY is a handshake's result. */
  helloSeen = false;
  /** Its handshake's result is counted (READY, MOVE or the refusal). */
  private counted = false;
  /** Its HELLO's place in the handshake throttle, until the handshake's result is known. */
  private ticket?: HandshakeTicket;
  /** Checks of its HELLO under way (the token looked up): a connection that ends meanwhile leaves the verdict to them. */
  private judging = 0;

  constructor(private readonly side: AgentSide) {}

  /** The HELLO's place in the throttle, held until its result is known. */
  hold(ticket: HandshakeTicket): void {
    this.ticket = ticket;
  }

  /** The result for the metrics, once. */
  count(result: string): void {
    if (this.counted) return;
    this.counted = true;
    this.side.edge.counters?.handshake(result);
  }

  /**
   * The handshake's result for the throttle: a failure's code counts
   * against the address; any other result, or none (the connection ended
   * with no verdict), gives the place back.
   */
  ended(result?: string): void {
    const ticket = this.ticket;
    this.ticket = undefined;
    if (result === undefined) ticket?.[Symbol.dispose]();
    else ticket?.ended(result);
  }

  /** READY (or MOVE) went out: counted, and the throttle's place given back. */
  succeeded(result: "READY" | "MOVE"): void {
    this.count(result);
    this.ended(result);
  }

  /**
   * A check of the HELLO starts: the verdict it reaches is what the throttle
   * counts, even if the agent hangs up first (a burst of HELLOs each closed
   * at once still meets the lock). The returned function ends it; one that
   * ends with no verdict on a closed connection gives the place back.
   */
  judge(): () => void {
    this.judging++;
    return () => {
      if (--this.judging === 0 && this.side.mux.closed) this.ended();
    };
  }

  /** The mux closed with `code`: what that means for a handshake not yet over. */
  muxClosed(code: string): void {
    // a handshake whose HELLO is not being checked gives its place back; one being checked is counted by its verdict
    if (this.judging === 0) this.ended();
    // every refusal of a handshake, whoever made it (admission, the throttle, a bad HELLO, the timeout), ends here
    if (!this.side.isReady && (this.helloSeen || code === WireError.HANDSHAKE_TIMEOUT)) this.count(code);
  }

  /** The connection closed (either side) with no check under way: no verdict is coming. */
  closed(): void {
    if (this.judging === 0) this.ended();
  }

  /** A refusal by the rules: the throttle, the log, the audit log, then the agent told. */
  refused(err: AppError, token: string, retryAfterS?: number): void {
    this.ended(err.code);
    log.info("agent refused", { code: err.code, reason: err.message, remote: this.side.transport.remote, address: this.side.transport.address });
    this.audit(err.code, token);
    this.side.edge.events?.refused(err, this.side.transport.address, token);
    this.side.refuse(err.code, err.message, retryAfterS);
  }

  /** A handshake that threw: the database's outage is a refusal to try again later; anything else is a bug. */
  failed(err: unknown): void {
    if (databaseUnavailable(err)) {
      reportUnavailable("agent handshake", err);
      return this.side.refuse("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S);
    }
    log.error("agent handshake failed", { session: this.side.sessionId, err: String(err) });
    this.side.refuse("INTERNAL", "the server failed to handle the handshake");
  }

  /**
   * A refused handshake into the audit log: counted per address, code and
   * minute (a flood is a few rows); whose token it was is looked up only
   * for the first of its minute.
   */
  audit(code: string, token?: string): void {
    const { core } = this.side.edge;
    core.audit.repeated({
      action: "agent.refused",
      address: this.side.transport.address,
      outcome: "refused",
      code,
      identify: async () => {
        const key = this.side.transport.sshKey;
        if (key !== undefined) {
          // an SSH session's: the key the gateway checked says who (its entry names the key, not a token)
          const found = await core.sshKeys.authenticate(key).catch(() => undefined);
          return found && { userId: found.user.id, username: found.user.username, details: { ssh_key_id: key } };
        }
        const found = token === undefined ? undefined : await core.tokens.identify(token);
        return found && { userId: found.user.id, username: found.user.username, tokenId: found.token.id };
      },
    });
  }
}
