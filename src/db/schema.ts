/**
 * The database tables. Columns are snake_case on disk and camelCase in code;
 * timestamps are ISO 8601 UTC strings ("2026-01-02T03:04:05.678Z"), dates
 * are "YYYY-MM-DD" (UTC), so both sort and compare as text.
 */
import { sql } from "drizzle-orm";
import { index, integer, primaryKey, sqliteTable, text, uniqueIndex } from "drizzle-orm/sqlite-core";

export const users = sqliteTable(
  "users",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    username: text("username").notNull(),
    passwordHash: text("password_hash").notNull(),
    role: text("role", { enum: ["user", "admin"] }).notNull().default("user"),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    maxTunnels: integer("max_tunnels").notNull().default(0),
    allowedProtocols: text("allowed_protocols").notNull().default("http,tcp"),
    trafficLimit: integer("traffic_limit").notNull().default(0),
    trafficPeriod: text("traffic_period", { enum: ["daily", "monthly", "quarterly"] })
      .notNull()
      .default("monthly"),
    maxDevices: integer("max_devices").notNull().default(0),
    skipWarning: integer("skip_warning", { mode: "boolean" }).notNull().default(false),
    canUseProxy: integer("can_use_proxy", { mode: "boolean" }).notNull().default(true),
    /** Every tunnel of the user must carry basic auth or OIDC (else AUTH_REQUIRED). */
    requireAuth: integer("require_auth", { mode: "boolean" }).notNull().default(false),
    /** Comma-separated CIDRs every visitor of the user's tunnels must come from, besides each tunnel's own rules; "" = anywhere. */
    allowCidrs: text("allow_cidrs").notNull().default(""),
    /** "<issuer> <subject>" of the company sign-in that made the user (they then have no password); null otherwise. */
    oidcSubject: text("oidc_subject"),
    /** The user may share private tunnels with other users (`--share`). */
    canShare: integer("can_share", { mode: "boolean" }).notNull().default(true),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [
    // usernames are unique regardless of case: "Alice" and "alice" are one person
    uniqueIndex("users_username_nocase").on(sql`lower(${t.username})`),
    uniqueIndex("users_oidc_subject").on(t.oidcSubject),
  ],
);

export const tokens = sqliteTable(
  "tokens",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    deviceName: text("device_name").notNull(),
    /** The first characters of the secret: finds the row without revealing the secret. */
    lookup: text("lookup").notNull(),
    /** SHA-256 (hex) of the whole secret; the secret itself is never stored. */
    secretHash: text("secret_hash").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    createdAt: text("created_at").notNull(),
    lastUsed: text("last_used"),
  },
  (t) => [uniqueIndex("tokens_lookup").on(t.lookup), index("tokens_user").on(t.userId)],
);

export const reservedSubdomains = sqliteTable(
  "reserved_subdomains",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    subdomain: text("subdomain").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
  },
  (t) => [uniqueIndex("reserved_subdomains_subdomain").on(t.subdomain), index("reserved_subdomains_user").on(t.userId)],
);

export const sessions = sqliteTable(
  "sessions",
  {
    /** SHA-256 (hex) of the cookie value; the cookie itself is never stored. */
    idHash: text("id_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    lastSeenAt: text("last_seen_at").notNull(),
    /** "admin" (the admin API and panel) or "portal" (a user's own pages on the apex): one never stands for the other. */
    kind: text("kind", { enum: ["admin", "portal"] }).notNull().default("admin"),
  },
  (t) => [index("sessions_user").on(t.userId)],
);

/** Bytes through each user's tunnels, one row per user and UTC day. */
export const trafficDaily = sqliteTable(
  "traffic_daily",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    date: text("date").notNull(),
    bytesIn: integer("bytes_in").notNull().default(0),
    bytesOut: integer("bytes_out").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.date] }), index("traffic_daily_date").on(t.date)],
);

/**
 * Admin API keys: a script's credential, acting as the admin who made it.
 * Like device tokens, only a lookup prefix and a SHA-256 of the secret are
 * kept. Revoking keeps the row (revoked_at set), for the list and the audit.
 */
export const adminKeys = sqliteTable(
  "admin_keys",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The first characters of the secret: finds the row without revealing the secret. */
    lookup: text("lookup").notNull(),
    /** SHA-256 (hex) of the whole secret; the secret itself is never stored. */
    secretHash: text("secret_hash").notNull(),
    createdAt: text("created_at").notNull(),
    /** null: never expires. */
    expiresAt: text("expires_at"),
    lastUsed: text("last_used"),
    revokedAt: text("revoked_at"),
  },
  (t) => [uniqueIndex("admin_keys_lookup").on(t.lookup), index("admin_keys_user").on(t.userId)],
);

/**
 * What admins did and what the agents' endpoint refused. No foreign keys:
 * an entry outlives the user, key or token it names. Refusals that repeat
 * are one row per address, code and minute with a count (`bucket` is that
 * key, unique; null for every other entry).
 */
export const auditLog = sqliteTable(
  "audit_log",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    at: text("at").notNull(),
    /** The admin who acted, or the agent's user when a refusal knows it. */
    userId: integer("user_id"),
    username: text("username"),
    /** The admin API key the request carried, when it was made with one. */
    keyId: integer("key_id"),
    /** The device token an agent presented, when it is known. */
    tokenId: integer("token_id"),
    address: text("address").notNull(),
    action: text("action").notNull(),
    /** What was acted on, e.g. "user:5". */
    target: text("target"),
    outcome: text("outcome", { enum: ["ok", "failed", "refused"] }).notNull(),
    /** The error code of a failure or refusal. */
    code: text("code"),
    /** JSON object: the changed fields and such; never a secret. */
    details: text("details"),
    count: integer("count").notNull().default(1),
    bucket: text("bucket"),
  },
  (t) => [
    index("audit_log_at").on(t.at),
    index("audit_log_user").on(t.userId),
    index("audit_log_action").on(t.action),
    uniqueIndex("audit_log_bucket").on(t.bucket),
  ],
);

/**
 * Several servers on one database (PostgreSQL): each node's heartbeat. A
 * node whose heartbeat is older than a few seconds is dead; its tunnels are
 * anyone's. Stays empty on SQLite (one node).
 */
export const clusterNodes = sqliteTable("cluster_nodes", {
  /** --node-id */
  id: text("id").primaryKey(),
  /** --node-url: where the other nodes reach this one; null: nowhere (no relay to it). */
  url: text("url"),
  startedAt: text("started_at").notNull(),
  /** The database's clock at the last heartbeat, ms since 1970 (one clock for all nodes). */
  heartbeatMs: integer("heartbeat_ms").notNull(),
});

/**
 * Every live tunnel of every node (PostgreSQL): what makes a name taken
 * cluster-wide, and what limits and /api/tunnels/active count. `name` is
 * the claim (cluster/live-rows.ts): "http:<name>" for a subdomain or a custom
 * hostname (an http or a tls tunnel's: one name space), "tcp:<node>:<port>"
 * or "udp:<node>:<port>" (a port is a node's own; tcp and udp are two port
 * spaces), "private:<owner id>/<name>" for a private tunnel, and
 * "member:<tunnel id>" for a pool member. Stays empty on SQLite.
 */
export const liveTunnels = sqliteTable(
  "live_tunnels",
  {
    name: text("name").primaryKey(),
    /** The tunnel's kind, every one the edge serves (protocol/kinds.ts KIND_NAMES, kept equal by test/protocol/kinds.test.ts); a pool's own row is "http". */
    protocol: text("protocol", { enum: ["http", "tcp", "tls", "udp"] }).notNull(),
    subdomain: text("subdomain"),
    port: integer("port"),
    nodeId: text("node_id")
      .notNull()
      .references(() => clusterNodes.id, { onDelete: "cascade" }),
    /** The agent's session; null while the tunnel waits in grace for its token. */
    sessionId: text("session_id"),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    username: text("username").notNull(),
    tokenId: integer("token_id").notNull(),
    connectedAt: text("connected_at").notNull(),
    /** Written by its node every few seconds, for the other nodes' /api/tunnels/active. */
    bytesIn: integer("bytes_in").notNull().default(0),
    bytesOut: integer("bytes_out").notNull().default(0),
    /** What a relaying node needs to serve it as its own node does: no browser warning, */
    skipWarning: integer("skip_warning", { mode: "boolean" }).notNull().default(false),
    /** and the response timeout its agent asked for (null: the server's --response-timeout). */
    responseTimeoutMs: integer("response_timeout_ms"),
    /** A tunnel with a subdomain and a custom hostname: the hostname, for the other nodes' lists and pools. */
    hostname: text("hostname"),
    /**
     * A pool's rows (cluster/cluster-pools.ts): how it spreads its requests. A member's row
     * is named "member:<tunnel id>"; a pool's name is held by a row of its own
     * ("http:<name>", no subdomain), which no tunnel is.
     */
    pool: text("pool", { enum: ["round-robin", "least-requests"] }),
    /** A pool member takes new requests (its health check, a rolling restart). */
    inRotation: integer("in_rotation", { mode: "boolean" }).notNull().default(true),
  },
  (t) => [index("live_tunnels_user").on(t.userId), index("live_tunnels_node").on(t.nodeId), index("live_tunnels_session").on(t.sessionId)],
);

/**
 * Hostnames of users' own (demo.acme.com, or a wildcard *.dev.acme.com):
 * their tunnels may be reached by them once verified, by an admin's word or
 * by the TXT record `_burrow-challenge.<hostname>` holding `token`.
 */
export const customHostnames = sqliteTable(
  "custom_hostnames",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    hostname: text("hostname").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    verified: integer("verified", { mode: "boolean" }).notNull().default(false),
    token: text("token").notNull(),
    createdAt: text("created_at").notNull(),
    verifiedAt: text("verified_at"),
  },
  (t) => [uniqueIndex("custom_hostnames_hostname").on(t.hostname), index("custom_hostnames_user").on(t.userId)],
);

/**
 * ACME shared by several nodes (PostgreSQL; these stay empty on SQLite,
 * where one node keeps its ACME state in its data dir): one account key for
 * the cluster, the certificates every node serves, the challenge answers any
 * node gives, who is ordering what now (so a certificate is ordered once),
 * and the names that had a certificate made on demand this week. Private
 * keys are here as they are in the data dir: the database is as secret.
 */
export const acmeAccount = sqliteTable("acme_account", {
  /** Always "cluster": one account key for the cluster. */
  id: text("id").primaryKey(),
  keyPem: text("key_pem").notNull(),
  createdAt: text("created_at").notNull(),
});

export const acmeCertificates = sqliteTable("acme_certificates", {
  /** The certificate's first name, as certificate-store.ts names it. */
  id: text("id").primaryKey(),
  certPem: text("cert_pem").notNull(),
  keyPem: text("key_pem").notNull(),
  notAfter: text("not_after").notNull(),
  storedBy: text("stored_by").notNull(),
  storedAt: text("stored_at").notNull(),
});

export const acmeChallenges = sqliteTable(
  "acme_challenges",
  {
    /** "<type> <name> <value>": one row per answer. */
    id: text("id").primaryKey(),
    /** http-01 (name: the token) or dns-01 (name: the TXT record's). */
    type: text("type").notNull(),
    name: text("name").notNull(),
    value: text("value").notNull(),
    /** The database's clock, ms since 1970: an answer no one withdrew stops being served. */
    expiresMs: integer("expires_ms").notNull(),
  },
  (t) => [index("acme_challenges_name").on(t.name)],
);

export const acmeOrders = sqliteTable("acme_orders", {
  /** The certificate's id: while its lease lasts, only that node orders it. */
  id: text("id").primaryKey(),
  nodeId: text("node_id").notNull(),
  untilMs: integer("until_ms").notNull(),
});

export const acmeOnDemand = sqliteTable("acme_on_demand", {
  name: text("name").primaryKey(),
  atMs: integer("at_ms").notNull(),
});

/**
 * Device logins in progress (RFC 8628): a `burrow login` asked for codes and
 * polls with the device code while its user approves the user code on the
 * portal. Only the device code's SHA-256 is kept; a row goes once its token
 * is taken, or when it expires.
 */
export const deviceCodes = sqliteTable(
  "device_codes",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    deviceCodeHash: text("device_code_hash").notNull(),
    /** 8 characters of the code's alphabet, without the dash it is shown with. */
    userCode: text("user_code").notNull(),
    deviceName: text("device_name").notNull(),
    /** Where the device asked from, shown to the user who approves. */
    address: text("address").notNull(),
    status: text("status", { enum: ["pending", "approved", "denied"] }).notNull().default("pending"),
    /** Who approved or denied it. */
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    /** Seconds the device must wait between polls; grows by 5 at each slow_down. */
    intervalS: integer("interval_s").notNull(),
    lastPollAt: text("last_poll_at"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [uniqueIndex("device_codes_device_code").on(t.deviceCodeHash), uniqueIndex("device_codes_user_code").on(t.userCode)],
);

/**
 * Invitations: a link an admin hands out; whoever opens it chooses a
 * username and becomes a user with the settings it carries. Only the
 * secret's SHA-256 is kept, found by its first characters as tokens are.
 */
export const invitations = sqliteTable(
  "invitations",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    lookup: text("lookup").notNull(),
    secretHash: text("secret_hash").notNull(),
    /** The new user's settings as the admin gave them (JSON, the admin API's field names). */
    settings: text("settings").notNull(),
    note: text("note").notNull().default(""),
    createdBy: integer("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
    usedBy: integer("used_by").references(() => users.id, { onDelete: "set null" }),
    /** The username it made, kept when that user is deleted. */
    usedUsername: text("used_username"),
  },
  (t) => [uniqueIndex("invitations_lookup").on(t.lookup)],
);

/**
 * Private tunnels' names and who they are shared with, as their owner's
 * agent last said: kept while the agent is away, so that a connector is told
 * TUNNEL_OFFLINE (shared, not live now) rather than NOT_SHARED.
 */
export const privateNames = sqliteTable(
  "private_names",
  {
    ownerId: integer("owner_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The kinds that can be private (protocol/kinds.ts PRIVATE_KINDS, kept equal by test/protocol/kinds.test.ts): a tls tunnel cannot. */
    protocol: text("protocol", { enum: ["http", "tcp", "udp"] }).notNull(),
    /** JSON array of the user ids it is shared with. */
    shares: text("shares").notNull().default("[]"),
    /** The owner's local port, offered to connectors as theirs when free. */
    localPort: integer("local_port"),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.ownerId, t.name] })],
);

/**
 * The operator's traffic policies (docs/policy.md): a document (YAML or
 * JSON, as written, so its errors keep their lines) that the edge runs
 * before a tunnel's own policy, on the tunnels its scope covers: every
 * tunnel ("server"), a user's ("user", `user_id`), or those reached by a
 * hostname or under a wildcard ("hostname", `hostname`). Every node loads
 * them again when a row's `updated_at` or the set of ids changes.
 */
export const trafficPolicies = sqliteTable(
  "traffic_policies",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    name: text("name").notNull(),
    scope: text("scope", { enum: ["server", "user", "hostname"] }).notNull(),
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    hostname: text("hostname"),
    document: text("document").notNull(),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("traffic_policies_name").on(t.name), index("traffic_policies_user").on(t.userId)],
);

/**
 * Users' SSH public keys: each is a device of its user for the SSH gateway
 * (ssh/), as a token is for the agent. Only the public half is kept. One key
 * belongs to one user (its fingerprint is unique): the key decides who
 * connects.
 */
export const sshKeys = sqliteTable(
  "ssh_keys",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    /** The key as OpenSSH writes it, without its comment: "<type> <base64>". */
    publicKey: text("public_key").notNull(),
    /** "SHA256:<base64>" of the key, as `ssh-keygen -l` prints it. */
    fingerprint: text("fingerprint").notNull(),
    /** The device token it was added with (`burrow keys add`): revoking that token removes the key too. Null: added on the portal or by an admin. */
    addedByToken: integer("added_by_token").references(() => tokens.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    lastUsed: text("last_used"),
  },
  (t) => [uniqueIndex("ssh_keys_fingerprint").on(t.fingerprint), index("ssh_keys_user").on(t.userId)],
);

/**
 * Webhooks (docs/events.md): where events are delivered, signed with
 * `secret` as Standard Webhooks says. An admin's (`user_id` null) may have
 * any event; a user's own (made on the portal, `user_id` set) only those
 * about that user's tunnels, tokens and quota. `origin` "flag" is the row
 * `--alert-webhook` keeps. While a rotation's overlap lasts
 * (`previous_until`), deliveries carry a signature by the old secret too.
 * `lease_node` and `lease_until_ms` (the database's clock): the node
 * delivering its events now, one at a time and in order; another node
 * takes over once the lease runs out (a node killed, a network cut).
 */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    url: text("url").notNull(),
    description: text("description").notNull().default(""),
    /** JSON array of event types or patterns ("*", "tunnel.*", "token.revoked"). */
    events: text("events").notNull(),
    enabled: integer("enabled", { mode: "boolean" }).notNull().default(true),
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    origin: text("origin", { enum: ["api", "portal", "flag"] }).notNull().default("api"),
    /** "whsec_" + base64 of the key: kept as it is, since every delivery is signed with it (the database is as secret). */
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousUntil: text("previous_until"),
    /** Deliveries dropped unsent because the webhook had --webhook-max-pending waiting already. */
    dropped: integer("dropped").notNull().default(0),
    leaseNode: text("lease_node"),
    leaseUntilMs: integer("lease_until_ms").notNull().default(0),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("webhooks_user").on(t.userId)],
);

/**
 * The outbox: what happened, written in the transaction of the change that
 * caused it (or, for what the edge sees happen, within a fraction of a
 * second after), only when a webhook wants it. `uid` is the webhook-id a
 * receiver deduplicates with; `dedupe`, when set, makes an event that must
 * be said once (a quota's warning for a period) one row however many nodes
 * notice it. No foreign key to users: an event outlives what it names.
 */
export const events = sqliteTable(
  "events",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    uid: text("uid").notNull(),
    type: text("type").notNull(),
    at: text("at").notNull(),
    /** The user it concerns, for users' own webhooks; null for the server's own events. */
    userId: integer("user_id"),
    /** JSON object: the event's `data`. */
    data: text("data").notNull(),
    dedupe: text("dedupe"),
  },
  (t) => [uniqueIndex("events_uid").on(t.uid), uniqueIndex("events_dedupe").on(t.dedupe), index("events_at").on(t.at)],
);

/**
 * One event for one webhook: pending until a 2xx answers it (delivered),
 * tried again with backoff until `give_up_ms` (failed, and redeliverable),
 * or dropped unsent past --webhook-max-pending. A webhook's pending
 * deliveries go out one at a time, by id. What the last attempt met is
 * kept on the row: when, its status code, how long it took, the error.
 */
export const webhookDeliveries = sqliteTable(
  "webhook_deliveries",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    webhookId: integer("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    eventId: integer("event_id")
      .notNull()
      .references(() => events.id, { onDelete: "cascade" }),
    status: text("status", { enum: ["pending", "delivered", "failed", "dropped"] }).notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    createdAt: text("created_at").notNull(),
    /** The database's clock, ms since 1970: not tried before then; null once it is not pending. */
    nextAttemptMs: integer("next_attempt_ms"),
    /** Past this (ms since 1970), a failed attempt is the last: --webhook-retry-window after it was first due. */
    giveUpMs: integer("give_up_ms").notNull(),
    lastAttemptAt: text("last_attempt_at"),
    responseStatus: integer("response_status"),
    durationMs: integer("duration_ms"),
    /** Why the last attempt failed, in a few words (never a secret, never the URL). */
    error: text("error"),
    deliveredAt: text("delivered_at"),
  },
  (t) => [
    index("webhook_deliveries_webhook").on(t.webhookId, t.status, t.id),
    index("webhook_deliveries_due").on(t.status, t.nextAttemptMs),
    index("webhook_deliveries_event").on(t.eventId),
  ],
);

/**
 * A device's tunnels kept on the server (its remote config): burrow.yml's
 * `tunnels:` map as JSON, checked by the agent's own reader before it is
 * kept (agent/settings/tunnels-json.ts), run by `burrow start --remote`
 * with this token and sent again to it on each change. `version` counts the
 * changes, so the agent can tell an older copy from a newer one.
 */
export const tokenConfigs = sqliteTable(
  "token_configs",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    tokenId: integer("token_id")
      .notNull()
      .references(() => tokens.id, { onDelete: "cascade" }),
    /** JSON: {NAME: {proto, addr, ...}} */
    tunnels: text("tunnels").notNull(),
    version: integer("version").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("token_configs_token").on(t.tokenId)],
);

/**
 * Every connected agent of every node (PostgreSQL), for GET /api/agents:
 * its session, what it said of itself in HELLO (its version, OS and
 * architecture, when it started), and `state`, JSON its node rewrites as
 * it changes: its tunnels by the agent's names, the config it runs, its
 * last error, and whether it takes the server's restart and update asks.
 * A node's rows go with it. Stays empty on SQLite (one node: the registry
 * in memory answers).
 */
export const liveAgents = sqliteTable(
  "live_agents",
  {
    sessionId: text("session_id").primaryKey(),
    nodeId: text("node_id")
      .notNull()
      .references(() => clusterNodes.id, { onDelete: "cascade" }),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    username: text("username").notNull(),
    /** The session's device: a token's id, or an SSH gateway session's key id negated (core/device-ids.ts); so no foreign key. */
    tokenId: integer("token_id").notNull(),
    connectedAt: text("connected_at").notNull(),
    /** The agent's address, "ip:port". */
    remote: text("remote").notNull(),
    /** JSON: the rest of what the list shows of it (core/live.ts AgentInfo, written by cluster/cluster-agents.ts). */
    state: text("state").notNull(),
  },
  (t) => [index("live_agents_node").on(t.nodeId), index("live_agents_user").on(t.userId)],
);

export type UserRow = typeof users.$inferSelect;
export type TokenRow = typeof tokens.$inferSelect;
export type ReservedSubdomainRow = typeof reservedSubdomains.$inferSelect;
export type CustomHostnameRow = typeof customHostnames.$inferSelect;
export type AdminKeyRow = typeof adminKeys.$inferSelect;
export type AuditRow = typeof auditLog.$inferSelect;
export type DeviceCodeRow = typeof deviceCodes.$inferSelect;
export type InvitationRow = typeof invitations.$inferSelect;
export type PrivateNameRow = typeof privateNames.$inferSelect;
export type TrafficPolicyRow = typeof trafficPolicies.$inferSelect;
export type SshKeyRow = typeof sshKeys.$inferSelect;
export type WebhookRow = typeof webhooks.$inferSelect;
export type EventRow = typeof events.$inferSelect;
export type DeliveryRow = typeof webhookDeliveries.$inferSelect;
export type TokenConfigRow = typeof tokenConfigs.$inferSelect;
export type LiveAgentRow = typeof liveAgents.$inferSelect;
