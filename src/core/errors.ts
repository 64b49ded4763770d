/**
 * Expected failures are values of one class, AppError, with a stable code.
 * Each code has one HTTP status, given here and nowhere else, with what it
 * means and what to do about it (docs/reference/codes.md is made from these
 * tables). The admin API renders an AppError as {"error": message}; the edge
 * sends its code in a handshake refusal or a tunnel close.
 */

/** What the admin API answers a request it will not carry out with. */
export const REQUEST_ERRORS = {
  BAD_REQUEST: {
    status: 400,
    meaning: "The body, query or path is not what the endpoint takes (the message names the field), or the Host header names no host.",
    advice: "Fix what the message names; `GET /api/openapi.json` has every endpoint's schema.",
  },
  UNAUTHORIZED: {
    status: 401,
    meaning: "No session or API key, an expired session, a revoked or expired key, a disabled or deleted user, or at login a wrong username or password.",
    advice: "Sign in again (`POST /api/auth/login`), or send a valid admin API key as `Authorization: Bearer brk_...`.",
  },
  FORBIDDEN: {
    status: 403,
    meaning: "The credentials are good but not an admin's; or a cross-site write from a browser; or an API key asking for another key.",
    advice: "Use an admin's session or key; make API keys from a signed-in session; send writes from the panel itself, or with a key and no cookie.",
  },
  NOT_FOUND: {
    status: 404,
    meaning: "No such user, token, SSH key, reserved subdomain, hostname, traffic policy, key or connected agent, or no such `/api` path.",
    advice: "Check the id (the lists give them) or the path.",
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    meaning: "A known path with a method it does not take; the `Allow` header lists those it does.",
    advice: "Use a method from `Allow`.",
  },
  USERNAME_TAKEN: { status: 409, meaning: "Another user has this username (case-insensitive).", advice: "Choose another username." },
  HOSTNAME_TAKEN: {
    status: 409,
    meaning: "The hostname is registered already, by this user or another.",
    advice: "Delete it first (`DELETE /api/hostnames/:id`), or register another.",
  },
  HOSTNAME_OVERLAP: {
    status: 409,
    meaning:
      "The hostname overlaps another user's: a wildcard covering a name another user has registered (verified or not), or a name one label under another user's wildcard. The message names the other hostname and its user.",
    advice: "Register it for the user who holds the other name, delete the other registration first, or register a name that does not overlap.",
  },
  HOSTNAME_NOT_VERIFIED: {
    status: 409,
    meaning: "The hostname's TXT record (`_burrow-challenge.<hostname>`) was not found with the value asked for; the message says what the lookup found.",
    advice: "Publish the record the hostname's `verification` names, wait for DNS to carry it, and verify again.",
  },
  POLICY_NAME_TAKEN: {
    status: 409,
    meaning: "Another traffic policy has this name.",
    advice: "Choose another name, or change that policy (`PUT /api/policies/:id`).",
  },
  SUBDOMAIN_ALREADY_RESERVED: {
    status: 409,
    meaning: "The subdomain is reserved already.",
    advice: "Release it first (`DELETE /api/domains/:id`), or reserve another.",
  },
  SSH_KEY_TAKEN: {
    status: 409,
    meaning: "The SSH key is registered already, to this user or another (a key says who connects, so it belongs to one user). Whose it is is not said.",
    advice: "Use another key (`ssh-keygen -t ed25519`), or remove this one from where it is first.",
  },
  LAST_ADMIN: {
    status: 409,
    meaning: "The change would delete, disable or demote the last enabled admin.",
    advice: "Make or enable another admin first.",
  },
  /** POST /api/backup on a server whose data is in PostgreSQL (pg_dump is the tool there). */
  BACKUP_UNAVAILABLE: {
    status: 409,
    meaning: "`POST /api/backup` on a server whose data is in PostgreSQL.",
    advice: "Back the database up with `pg_dump`.",
  },
  TOO_MANY_DEVICES: {
    status: 409,
    meaning: "On the portal: the user has `max_devices` device tokens already, so no other may be added (by the portal or by approving a `burrow login`).",
    advice: "Revoke a device you no longer use on the portal's Devices page, or ask an admin to raise `max_devices`.",
  },
  PORTAL_OFF: {
    status: 409,
    meaning: "`POST /api/invitations` on a server whose portal is off (`--portal off`): an invitation is opened on the portal.",
    advice: "Run the server with the portal on (the default), or make the user with `POST /api/users`.",
  },
  INVITATION_INVALID: {
    status: 410,
    meaning: "The invitation link is unknown, used already, expired or withdrawn.",
    advice: "Ask an admin for a new invitation.",
  },
  PORTAL_MISDIRECTED: {
    status: 421,
    meaning: "A portal request whose Host is not the server's domain (a connection to the apex reused for another name).",
    advice: "Send portal requests to the server's domain itself, e.g. `https://tunnels.example.com/_burrow/api/me`.",
  },
  TOO_MANY_WEBHOOKS: {
    status: 409,
    meaning: "The server has `--webhooks-max` webhooks already, or (on the portal) the user has `--webhooks-per-user`.",
    advice: "Delete a webhook you no longer use, or ask the server's admin to raise the cap.",
  },
  DELIVERY_PENDING: {
    status: 409,
    meaning: "`POST /api/webhooks/:id/deliveries/:delivery/retry` on a delivery that is still pending: it is being tried already.",
    advice: "Wait for it: `GET /api/webhooks/:id/deliveries` shows its next attempt.",
  },
  AGENT_REFUSED: {
    status: 409,
    meaning: "`POST /api/agents/:id/restart` or `/update`: the agent said no (its `--remote-restart` or `--remote-update` is off, it runs no `burrow update`, or it is older than the server's asks), or the session is the SSH gateway's (`ssh -R`), which takes no asks; the message is its answer.",
    advice: "Restart or update it on its machine, or run it with the flag on.",
  },
  AGENT_NO_ANSWER: {
    status: 504,
    meaning: "`POST /api/agents/:id/restart` or `/update`: the agent did not answer within 10 s (its connection going, or its node unreachable).",
    advice: "List the agents again: it may have reconnected under a new id.",
  },
  PAYLOAD_TOO_LARGE: { status: 413, meaning: "The request body is over 1 MiB.", advice: "Send a smaller body." },
  TOO_MANY_REQUESTS: {
    status: 429,
    meaning: "Too many failed logins: 5 for one username or 20 from one address within 15 minutes lock further attempts, even with the right password, for 30 s, doubling up to 15 minutes.",
    advice: "Wait the `Retry-After` seconds before trying again.",
  },
} as const;

/** What the server answers when the fault is its own: the admin API and a handshake alike. */
export const SERVER_FAULTS = {
  INTERNAL: {
    status: 500,
    meaning: "The server failed to handle the request or handshake: a bug. Its log has a line with the details.",
    advice: "Look for the line in the server's log (`admin request failed`, or the handshake's), and report it.",
  },
  /** The database is down, restarting or read-only (a standby): nothing was changed; try again shortly (db/unavailable.ts). */
  DATABASE_UNAVAILABLE: {
    status: 503,
    meaning: "The database is down, restarting or read-only (a standby): nothing was changed. The admin API answers with `Retry-After: 5`, a handshake refusal with `retry_after`; tunnels already up keep serving.",
    advice: "Try again in a few seconds (the agent does by itself). If it lasts, look at the database; the server logs a warning every 10 s at most.",
  },
} as const;

/** Refusals of an agent's tunnels, at the handshake (in the order it checks them) or while they run. */
export const TUNNEL_REFUSALS = {
  // the agent's address failed too many handshakes lately: refused before its token is read;
  // the ERROR frame's retry_after says when to come back (core/handshake-throttle.ts)
  RATE_LIMITED: {
    status: 429,
    meaning: "Too many failed handshakes from this address (`--handshake-limit` a minute): its handshakes are refused before the token is read, for 30 s, doubling up to 15 minutes. `retry_after` says when to come back.",
    advice: "Wait: the agent waits `retry_after` and tries again by itself. If the failures are yours, fix the token; behind a proxy, give the server `--trusted-proxies`.",
  },
  AUTH_FAILED: {
    status: 401,
    meaning: "The token is not one this server issued.",
    advice: "Check `--token` (or `BURROW_TOKEN`, burrow.yml's `token:`, what `burrow login` saved); ask an admin for a token.",
  },
  TOKEN_DISABLED: { status: 403, meaning: "The token was revoked.", advice: "Ask an admin for a new token." },
  KEY_REVOKED: {
    status: 403,
    meaning: "The SSH key was removed from its user's keys; removed while connected, its SSH sessions are closed with it.",
    advice: "Add the key again (the portal, `burrow keys add`), or ask an admin to.",
  },
  USER_DISABLED: { status: 403, meaning: "The token's user is disabled.", advice: "Ask an admin to enable the user." },
  PROTOCOL_DENIED: {
    status: 403,
    meaning: "The user may not open tunnels of this protocol (its `allowed_protocols`); narrowed while they are live, its live tunnels of that kind and connectors to one are closed with it.",
    advice: "Ask an admin to allow it.",
  },
  TLS_UNAVAILABLE: {
    status: 503,
    meaning:
      "The server passes no TLS through by name: it has neither TLS on its public port (`--tls-cert` or ACME) nor a `--tls-port`.",
    advice: "Use a tcp tunnel, or ask the server's admin for `--tls-port`.",
  },
  PROXY_DENIED: {
    status: 403,
    meaning: "The agent came through a proxy (`--proxy`, `HTTPS_PROXY`) and the user's `can_use_proxy` is false; turned off while it is connected, the session is closed with it.",
    advice: "Connect without the proxy, or ask an admin to allow it.",
  },
  DEVICE_LIMIT: {
    status: 429,
    meaning: "The user has `max_devices` distinct tokens with live connections already; lowered below them, the sessions of the newest tokens beyond it are closed with it.",
    advice: "Stop an agent that uses another of the user's tokens, or ask an admin to raise `max_devices`.",
  },
  TUNNEL_LIMIT: {
    status: 429,
    meaning: "The user has `max_tunnels` tunnels already (lowered below the live count, the newest tunnels beyond it are closed with it), or a tunnel added to a connection that holds 16 already.",
    advice: "Stop another tunnel, or ask an admin to raise `max_tunnels`.",
  },
  TRAFFIC_EXCEEDED: {
    status: 429,
    meaning: "The user's traffic this period reached its `traffic_limit`; tunnels already up are closed within a second.",
    advice: "Wait for the next period (`traffic_period`, in UTC), or ask an admin to raise the limit.",
  },
  SUBDOMAIN_INVALID: {
    status: 400,
    meaning: "The subdomain asked for is not one DNS label: `a-z`, `0-9` and `-`, 1 to 63 characters, no hyphen first or last.",
    advice: "Ask for another name (`--subdomain`, burrow.yml's `subdomain:`).",
  },
  SUBDOMAIN_RESERVED: {
    status: 403,
    meaning: "The subdomain is reserved for another user, or is a system name (`--system-subdomains`); reserved for another user while live, the tunnel on it is closed with it.",
    advice: "Ask for another name, or have an admin reserve this one for you.",
  },
  HOSTNAME_NOT_ALLOWED: {
    status: 403,
    meaning:
      "The tunnel asked for a hostname that is not a verified custom hostname of its user's (`/api/hostnames`); a wildcard covers one label under it, never a name another user has registered (verified or not). Deleted while live, the tunnel on it is closed with it.",
    advice: "Ask the server's admin to register the hostname for you, and verify it (`POST /api/hostnames/:id/verify`).",
  },
  HOSTNAME_IN_USE: {
    status: 409,
    meaning: "Another tunnel has this hostname now (one hostname, one tunnel).",
    advice: "Stop the other tunnel, or use another hostname.",
  },
  PRIVATE_NAME_INVALID: {
    status: 400,
    meaning: "A private tunnel's `--name` is not 1-63 characters from a-z, 0-9 and -, or `--share` names no one, or too many (64 at most).",
    advice: "Give `--name` a short name such as `db`, and `--share` usernames separated by commas.",
  },
  SHARE_UNKNOWN_USER: {
    status: 400,
    meaning: "`--share` names a username no user has; the message lists them.",
    advice: "Check the spelling with the people you share with, or leave them out.",
  },
  SHARE_DENIED: {
    status: 403,
    meaning: "The user's `can_share` is false: they may open private tunnels for themselves, not share them.",
    advice: "Leave `--share` out, or ask an admin to allow sharing.",
  },
  PRIVATE_NAME_TAKEN: {
    status: 409,
    meaning: "The user has a live private tunnel of this name already, from another agent.",
    advice: "Stop the other one, or choose another `--name`.",
  },
  NOT_SHARED: {
    status: 403,
    meaning: "`burrow connect owner/name`: no such private tunnel is shared with you (or its owner may no longer share). It says the same whether the owner or the name exists or not. Unshared while connected, the connector is closed with it, and its next connection refused.",
    advice: "Check the name with its owner, and ask them to add you with `--share`.",
  },
  TUNNEL_OFFLINE: {
    status: 503,
    meaning: "`burrow connect`: the private tunnel is shared with you, but its owner's agent is not connected now.",
    advice: "Wait: `burrow connect` waits and connects when it comes back.",
  },
  SUBDOMAIN_TAKEN: {
    status: 409,
    meaning: "Another live tunnel has the subdomain; a dropped agent's name stays its token's for 60 s.",
    advice: "Ask for another name, or stop the tunnel that has it.",
  },
  ADMISSION_REFUSED: {
    status: 403,
    meaning: "The server's admission hook (`--admission-hook`) refused the tunnel; the message is the hook's own (`code: message`).",
    advice: "Ask the server's admin what the hook allows.",
  },
  ADMISSION_UNAVAILABLE: {
    status: 503,
    meaning: "The server's admission hook did not answer in time, failed, or answered something other than a 2xx with `{\"allow\": ...}`; the server refuses while it cannot ask (unless it runs with `--admission-hook-fail-open`).",
    advice: "Wait: the agent tries again. If it lasts, the server's admin should look at the hook.",
  },
  UDP_UNAVAILABLE: {
    status: 503,
    meaning: "The server takes no udp tunnels: it was started with `--udp-ports off`.",
    advice: "Ask the server's admin for a `--udp-ports` range.",
  },
  PORT_UNAVAILABLE: {
    status: 409,
    meaning: "The TCP or UDP port asked for is outside the server's `--tcp-ports` or `--udp-ports` or in use, no port of the range is free, or the server cannot listen at all (out of open files, not permitted: the message says which).",
    advice: "Ask for another port, or for none (`--remote-port`); when the server cannot listen, its log has the port and the error.",
  },
} as const;

/** A tunnel's access settings (core/access.ts), checked after the user's limits: refused before it opens, never with a secret in the message. */
export const ACCESS_REFUSALS = {
  CIDR_INVALID: {
    status: 400,
    meaning: "An allow or deny entry is not an IPv4/IPv6 address or CIDR.",
    advice: "Fix the entry: `10.0.0.0/8`, `2001:db8::/32`, `203.0.113.7`.",
  },
  BASIC_AUTH_INVALID: {
    status: 400,
    meaning: "An empty user or password, or `:` in the user.",
    advice: "Give `USER:PASS`, with no `:` in the user.",
  },
  HEADER_RULE_INVALID: {
    status: 400,
    meaning: "A header name that is not a token, one the edge or HTTP owns (`Host`, `Connection`, `Content-Length`, `X-Forwarded-*`, ...), or a value with line breaks.",
    advice: "Fix the rule; the headers the edge owns cannot be set or removed.",
  },
  OIDC_INVALID: {
    status: 400,
    meaning: "The issuer is not an `https://` URL (http only on loopback, with the server's `--oidc-http-issuers loopback`) or has a user or password in it; an empty client id or secret; a bad email rule; or OIDC together with basic auth.",
    advice: "Fix the OIDC settings; a tunnel takes basic auth or OIDC, not both.",
  },
  /** The OIDC issuer did not answer discovery (/.well-known/openid-configuration) with usable metadata. */
  OIDC_DISCOVERY_FAILED: {
    status: 502,
    meaning: "The issuer did not answer discovery (`/.well-known/openid-configuration`) with usable metadata within 5 s.",
    advice: "Check the issuer's URL, and that the server can reach it.",
  },
  /** The tunnel's own traffic policy did not load at the edge (its errors, with their lines, are the message). */
  POLICY_INVALID: {
    status: 400,
    meaning: "The tunnel's own traffic policy (`--policy-file`, burrow.yml's `policy:`, the SDK's `policy`) does not load: the message lists its errors with their lines and codes, as `burrow policy check` prints them. The agent checks it before it connects, so this comes from a server whose caps are narrower than the agent's, or from the SDK, which leaves the check to the server.",
    advice: "Fix the policy (`burrow policy check FILE`), or ask the server's admin about its policy caps.",
  },
  /** The user's tunnel policies took the compile time the server gives a user a minute. */
  POLICY_LIMITED: {
    status: 429,
    meaning: "Compiling the user's tunnels' traffic policies took the time the server gives a user a minute (`--policy-compile-budget`; a policy at the caps takes about a second, the same policy for the same tunnel is compiled once and kept): this handshake's is not compiled.",
    advice: "Wait: the agent tries again. Smaller policies compile faster; ask the server's admin about the budget.",
  },
  /** The user's require_auth: the tunnel carries neither basic auth nor OIDC. */
  AUTH_REQUIRED: {
    status: 403,
    meaning: "The user's `require_auth`: the tunnel has neither basic auth nor OIDC (a tcp tunnel can have neither). Live sessions holding such a tunnel are closed with it when an admin turns it on.",
    advice: "Protect the tunnel with `--basic-auth` or `--oidc-issuer` (http tunnels only).",
  },
} as const;

type Family = Record<string, { status: number }>;
type Statuses<F extends Family> = { readonly [K in keyof F]: F[K]["status"] };
const statuses = <F extends Family>(family: F) => Object.fromEntries(Object.entries(family).map(([code, e]) => [code, e.status])) as Statuses<F>;

/** Each code's HTTP status, whatever its family. */
export const ERROR_STATUS = {
  ...statuses(REQUEST_ERRORS),
  ...statuses(SERVER_FAULTS),
  ...statuses(TUNNEL_REFUSALS),
  ...statuses(ACCESS_REFUSALS),
};

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
