/**
 * What core and the admin API need from whatever holds live tunnels: what is
 * live now, and a way to close what an admin action takes away. The edge's
 * registry implements it; core never imports the edge.
 */
import type { UserRow } from "../db/schema.ts";
import type { ErrorCode } from "./errors.ts";
import type { Protocol } from "../validate/fields.ts";

export interface ActiveTunnel {
  protocol: Protocol;
  /** For http and tls tunnels. */
  subdomain?: string;
  /** Its custom hostname, when it has one. */
  hostname?: string;
  /** A pool member: whether it takes new requests now. */
  pool?: { inRotation: boolean };
  /** A private tunnel: reached as `target` (owner/name) by its owner and the users of `shares`; `connected`: connectors now. */
  private?: { target: string; shares: string[]; connected: number };
  /** For tcp tunnels. */
  port?: number;
  userId: number;
  username: string;
  tokenId: number;
  connectedAt: Date;
  bytesIn: number;
  bytesOut: number;
}

export interface LiveTunnels {
  /** On one node an answer at once; with several, a query of the shared registry. */
  list(): ActiveTunnel[] | Promise<ActiveTunnel[]>;
  /** Closes every live tunnel of the user; the agent is told why. */
  closeUser(userId: number, code: ErrorCode, message: string): void;
  /** Closes every live tunnel opened with the token. */
  closeToken(tokenId: number, code: ErrorCode, message: string): void;
  /**
   * The user's require_auth or allow_cidrs changed: live tunnels take the new
   * allow list at once, and a session with a tunnel that lacks the
   * authentication now required is closed (AUTH_REQUIRED).
   */
  userAccessChanged?(user: UserRow): void;
}

export const noLiveTunnels: LiveTunnels = { list: () => [], closeUser() {}, closeToken() {} };
