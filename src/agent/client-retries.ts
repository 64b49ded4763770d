/**
 * What a session's end means for the agent's next try (client.ts run()):
 * which refusals end the agent for good, which ask it to wait and try
 * again, and how long it waits between tries. client.ts exports them
 * with the Agent; the reference of refusal codes reads them there.
 */
import { RECONNECT_BASE_MS, RECONNECT_MAX_MS, WireError } from "../protocol/wire.ts";
import { ACCESS_UNSUPPORTED, POLICY_UNSUPPORTED, REMOTE_UNSUPPORTED } from "./access.ts";

/** Refusals that no retry can fix: the agent exits. */
export const FATAL_CODES = new Set([
  "AUTH_FAILED",
  "TOKEN_DISABLED",
  "USER_DISABLED",
  "PROTOCOL_DENIED",
  "PROXY_DENIED",
  "TRAFFIC_EXCEEDED",
  "SUBDOMAIN_INVALID",
  "SUBDOMAIN_RESERVED",
  // a hostname the user does not hold (verified) now: an admin registers it, not a retry
  "HOSTNAME_NOT_ALLOWED",
  "VERSION_MISMATCH",
  WireError.SESSION_REPLACED,
  WireError.PROTOCOL_ERROR,
  // a tunnel's access settings: the same HELLO would be refused again
  "CIDR_INVALID",
  "BASIC_AUTH_INVALID",
  "HEADER_RULE_INVALID",
  "OIDC_INVALID",
  "AUTH_REQUIRED",
  ACCESS_UNSUPPORTED,
  // a tunnel's traffic policy: the same document is refused again; a server that would not run it
  "POLICY_INVALID",
  POLICY_UNSUPPORTED,
  // --remote on a server that keeps no remote config
  REMOTE_UNSUPPORTED,
  // private tunnels: their owner's declaration, or a connector not shared with
  "PRIVATE_NAME_INVALID",
  "SHARE_UNKNOWN_USER",
  "SHARE_DENIED",
  "NOT_SHARED",
]);

/**
 * Refusals for a while, not for good: the server turned this address away
 * (too many failed handshakes from it, maybe not ours), or its database is
 * down or read-only. Not fatal, even on a first connect: the agent says so,
 * waits what the refusal's retry_after asks (bounded) and tries again;
 * sooner would only be refused again, and giving up would leave a good
 * agent down because of someone else on its address or an outage.
 */
const THROTTLED = "RATE_LIMITED";
export const WAIT_AND_RETRY = new Set([THROTTLED, "DATABASE_UNAVAILABLE", "TUNNEL_OFFLINE", "ADMISSION_UNAVAILABLE"]);
/** The longest wait a server's retry_after can impose; past it the agent tries anyway. */
const MAX_RETRY_AFTER_S = 3600;

/** Exponential backoff with jitter: half fixed, half random, capped. */
export function backoff(attempt: number): number {
  const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

/** The wait a RATE_LIMITED refusal asks for, plus up to a second of jitter; without one, the usual backoff. */
export function retryAfterDelay(retryAfterS: number | undefined, attempt: number): number {
  if (retryAfterS === undefined) return backoff(attempt);
  return Math.round(Math.min(retryAfterS, MAX_RETRY_AFTER_S) * 1000 + Math.random() * 1000);
}
