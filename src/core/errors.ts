/**
 * Expected failures are values of one class, AppError, with a stable code.
 * Each code has one HTTP status, given here and nowhere else. The admin API
 * renders an AppError as {"error": message}; the edge sends its code in a
 * handshake refusal or a tunnel close.
 */
export const ERROR_STATUS = {
  BAD_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  METHOD_NOT_ALLOWED: 405,
  USERNAME_TAKEN: 409,
  SUBDOMAIN_ALREADY_RESERVED: 409,
  LAST_ADMIN: 409,
  /** POST /api/backup on a server whose data is in PostgreSQL (pg_dump is the tool there). */
  BACKUP_UNAVAILABLE: 409,
  PAYLOAD_TOO_LARGE: 413,
  TOO_MANY_REQUESTS: 429,
  INTERNAL: 500,
  /** The database is down, restarting or read-only (a standby): nothing was changed; try again shortly (db/unavailable.ts). */
  DATABASE_UNAVAILABLE: 503,
  // refusals of a tunnel, at the handshake or while it runs
  AUTH_FAILED: 401,
  TOKEN_DISABLED: 403,
  USER_DISABLED: 403,
  PROTOCOL_DENIED: 403,
  PROXY_DENIED: 403,
  DEVICE_LIMIT: 429,
  TUNNEL_LIMIT: 429,
  TRAFFIC_EXCEEDED: 429,
  SUBDOMAIN_INVALID: 400,
  SUBDOMAIN_RESERVED: 403,
  SUBDOMAIN_TAKEN: 409,
  PORT_UNAVAILABLE: 409,
  // a tunnel's access settings (core/access.ts): refused before it opens, never with a secret in the message
  CIDR_INVALID: 400,
  BASIC_AUTH_INVALID: 400,
  HEADER_RULE_INVALID: 400,
  OIDC_INVALID: 400,
  /** The OIDC issuer did not answer discovery (/.well-known/openid-configuration) with usable metadata. */
  OIDC_DISCOVERY_FAILED: 502,
  /** The user's require_auth: the tunnel carries neither basic auth nor OIDC. */
  AUTH_REQUIRED: 403,
  // the agent's address failed too many handshakes lately: refused before its token is read;
  // the ERROR frame's retry_after says when to come back (core/handshake-throttle.ts)
  RATE_LIMITED: 429,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  /** Extra response headers, such as Retry-After or Allow. */
  readonly headers: Record<string, string>;

  constructor(code: ErrorCode, message: string, headers: Record<string, string> = {}) {
    super(message);
    this.name = "AppError";
    this.code = code;
    this.status = ERROR_STATUS[code];
    this.headers = headers;
  }
}

export const badRequest = (message: string) => new AppError("BAD_REQUEST", message);
export const notFound = (what: string) => new AppError("NOT_FOUND", `${what} not found`);
