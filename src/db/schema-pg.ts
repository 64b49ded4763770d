/**
 * The database tables for PostgreSQL: the tables of schema.ts (which
 * documents them), with the same names, columns, keys, defaults and
 * indexes, so the same queries run on either engine. Only the column types
 * differ where PostgreSQL has a better one; each such column says why.
 * test/db/schema-correspondence.test.ts keeps the two files in step.
 */
import { sql } from "drizzle-orm";
import { bigint, boolean, index, integer, pgTable, primaryKey, text, uniqueIndex } from "drizzle-orm/pg-core";

export const users = pgTable(
  "users",
  {
    // identity, not AUTOINCREMENT: inserts omit it and get it back from returning(); by default, so rows can be copied with their ids
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    username: text("username").notNull(),
    passwordHash: text("password_hash").notNull(),
    role: text("role", { enum: ["user", "admin"] }).notNull().default("user"),
    // boolean, not 0/1 integer: PostgreSQL has the type
    enabled: boolean("enabled").notNull().default(true),
    // bigint, as every limit: the API takes any whole number up to 2^53 - 1, as SQLite's 64-bit integer holds it
    maxTunnels: bigint("max_tunnels", { mode: "number" }).notNull().default(0),
    allowedProtocols: text("allowed_protocols").notNull().default("http,tcp"),
    // bigint, not integer: a byte limit passes 2^31 (2 GiB); SQLite's integer is 64-bit already
    trafficLimit: bigint("traffic_limit", { mode: "number" }).notNull().default(0),
    trafficPeriod: text("traffic_period", { enum: ["daily", "monthly", "quarterly"] })
      .notNull()
      .default("monthly"),
    // bigint, as every limit (see max_tunnels)
    maxDevices: bigint("max_devices", { mode: "number" }).notNull().default(0),
    // boolean, not 0/1 integer: PostgreSQL has the type
    skipWarning: boolean("skip_warning").notNull().default(false),
    // boolean, not 0/1 integer: PostgreSQL has the type
    canUseProxy: boolean("can_use_proxy").notNull().default(true),
    // boolean, not 0/1 integer: PostgreSQL has the type
    requireAuth: boolean("require_auth").notNull().default(false),
    allowCidrs: text("allow_cidrs").notNull().default(""),
    oidcSubject: text("oidc_subject"),
    // boolean, not 0/1 integer: PostgreSQL has the type
    canShare: boolean("can_share").notNull().default(true),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("users_username_nocase").on(sql`lower(${t.username})`), uniqueIndex("users_oidc_subject").on(t.oidcSubject)],
);

export const tokens = pgTable(
  "tokens",
  {
    // identity, not AUTOINCREMENT: inserts omit it and get it back from returning(); by default, so rows can be copied with their ids
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    deviceName: text("device_name").notNull(),
    lookup: text("lookup").notNull(),
    secretHash: text("secret_hash").notNull(),
    // boolean, not 0/1 integer: PostgreSQL has the type
    enabled: boolean("enabled").notNull().default(true),
    createdAt: text("created_at").notNull(),
    lastUsed: text("last_used"),
  },
  (t) => [uniqueIndex("tokens_lookup").on(t.lookup), index("tokens_user").on(t.userId)],
);

export const reservedSubdomains = pgTable(
  "reserved_subdomains",
  {
    // identity, not AUTOINCREMENT: inserts omit it and get it back from returning(); by default, so rows can be copied with their ids
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    subdomain: text("subdomain").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
  },
  (t) => [uniqueIndex("reserved_subdomains_subdomain").on(t.subdomain), index("reserved_subdomains_user").on(t.userId)],
);

export const sessions = pgTable(
  "sessions",
  {
    idHash: text("id_hash").primaryKey(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    lastSeenAt: text("last_seen_at").notNull(),
    kind: text("kind", { enum: ["admin", "portal"] }).notNull().default("admin"),
  },
  (t) => [index("sessions_user").on(t.userId)],
);

export const trafficDaily = pgTable(
  "traffic_daily",
  {
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    date: text("date").notNull(),
    // bigint, not integer: a busy day's bytes pass 2^31 (2 GiB); SQLite's integer is 64-bit already
    bytesIn: bigint("bytes_in", { mode: "number" }).notNull().default(0),
    // bigint, not integer: a busy day's bytes pass 2^31 (2 GiB); SQLite's integer is 64-bit already
    bytesOut: bigint("bytes_out", { mode: "number" }).notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.userId, t.date] }), index("traffic_daily_date").on(t.date)],
);

export const adminKeys = pgTable(
  "admin_keys",
  {
    // identity, not AUTOINCREMENT: inserts omit it and get it back from returning(); by default, so rows can be copied with their ids
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    lookup: text("lookup").notNull(),
    secretHash: text("secret_hash").notNull(),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at"),
    lastUsed: text("last_used"),
    revokedAt: text("revoked_at"),
  },
  (t) => [uniqueIndex("admin_keys_lookup").on(t.lookup), index("admin_keys_user").on(t.userId)],
);

export const auditLog = pgTable(
  "audit_log",
  {
    // identity, not AUTOINCREMENT: inserts omit it and get it back from returning(); by default, so rows can be copied with their ids
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    at: text("at").notNull(),
    userId: integer("user_id"),
    username: text("username"),
    keyId: integer("key_id"),
    tokenId: integer("token_id"),
    address: text("address").notNull(),
    action: text("action").notNull(),
    target: text("target"),
    outcome: text("outcome", { enum: ["ok", "failed", "refused"] }).notNull(),
    code: text("code"),
    details: text("details"),
    // bigint, not integer: a count that only grows; SQLite's integer is 64-bit already
    count: bigint("count", { mode: "number" }).notNull().default(1),
    bucket: text("bucket"),
  },
  (t) => [
    index("audit_log_at").on(t.at),
    index("audit_log_user").on(t.userId),
    index("audit_log_action").on(t.action),
    uniqueIndex("audit_log_bucket").on(t.bucket),
  ],
);

/** Users' own hostnames (schema.ts says what they are). */
export const customHostnames = pgTable(
  "custom_hostnames",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    hostname: text("hostname").notNull(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    verified: boolean("verified").notNull().default(false),
    token: text("token").notNull(),
    createdAt: text("created_at").notNull(),
    verifiedAt: text("verified_at"),
  },
  (t) => [uniqueIndex("custom_hostnames_hostname").on(t.hostname), index("custom_hostnames_user").on(t.userId)],
);

/** See schema.ts. */
export const acmeAccount = pgTable("acme_account", {
  id: text("id").primaryKey(),
  keyPem: text("key_pem").notNull(),
  createdAt: text("created_at").notNull(),
});

/** See schema.ts. */
export const acmeCertificates = pgTable("acme_certificates", {
  id: text("id").primaryKey(),
  certPem: text("cert_pem").notNull(),
  keyPem: text("key_pem").notNull(),
  notAfter: text("not_after").notNull(),
  storedBy: text("stored_by").notNull(),
  storedAt: text("stored_at").notNull(),
});

/** See schema.ts. */
export const acmeChallenges = pgTable(
  "acme_challenges",
  {
    id: text("id").primaryKey(),
    type: text("type").notNull(),
    name: text("name").notNull(),
    value: text("value").notNull(),
    expiresMs: bigint("expires_ms", { mode: "number" }).notNull(),
  },
  (t) => [index("acme_challenges_name").on(t.name)],
);

/** See schema.ts. */
export const acmeOrders = pgTable("acme_orders", {
  id: text("id").primaryKey(),
  nodeId: text("node_id").notNull(),
  untilMs: bigint("until_ms", { mode: "number" }).notNull(),
});

/** See schema.ts. */
export const acmeOnDemand = pgTable("acme_on_demand", {
  name: text("name").primaryKey(),
  atMs: bigint("at_ms", { mode: "number" }).notNull(),
});

/** See schema.ts. */
export const sshKeys = pgTable(
  "ssh_keys",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    publicKey: text("public_key").notNull(),
    fingerprint: text("fingerprint").notNull(),
    addedByToken: integer("added_by_token").references(() => tokens.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
    lastUsed: text("last_used"),
  },
  (t) => [uniqueIndex("ssh_keys_fingerprint").on(t.fingerprint), index("ssh_keys_user").on(t.userId)],
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
export type SshKeyRow = typeof sshKeys.$inferSelect;

/** See schema.ts. */
export const clusterNodes = pgTable("cluster_nodes", {
  id: text("id").primaryKey(),
  url: text("url"),
  startedAt: text("started_at").notNull(),
  // bigint: milliseconds since 1970 pass 2^31
  heartbeatMs: bigint("heartbeat_ms", { mode: "number" }).notNull(),
});

/** See schema.ts. */
export const liveTunnels = pgTable(
  "live_tunnels",
  {
    name: text("name").primaryKey(),
    protocol: text("protocol", { enum: ["http", "tcp", "tls", "udp"] }).notNull(),
    subdomain: text("subdomain"),
    port: integer("port"),
    nodeId: text("node_id")
      .notNull()
      .references(() => clusterNodes.id, { onDelete: "cascade" }),
    sessionId: text("session_id"),
    userId: integer("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    username: text("username").notNull(),
    tokenId: integer("token_id").notNull(),
    connectedAt: text("connected_at").notNull(),
    // bigint: byte counters pass 2^31
    bytesIn: bigint("bytes_in", { mode: "number" }).notNull().default(0),
    bytesOut: bigint("bytes_out", { mode: "number" }).notNull().default(0),
    // boolean, not 0/1 integer: PostgreSQL has the type
    skipWarning: boolean("skip_warning").notNull().default(false),
    responseTimeoutMs: integer("response_timeout_ms"),
    hostname: text("hostname"),
    pool: text("pool", { enum: ["round-robin", "least-requests"] }),
    inRotation: boolean("in_rotation").notNull().default(true),
  },
  (t) => [index("live_tunnels_user").on(t.userId), index("live_tunnels_node").on(t.nodeId), index("live_tunnels_session").on(t.sessionId)],
);

export const deviceCodes = pgTable(
  "device_codes",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    deviceCodeHash: text("device_code_hash").notNull(),
    userCode: text("user_code").notNull(),
    deviceName: text("device_name").notNull(),
    address: text("address").notNull(),
    status: text("status", { enum: ["pending", "approved", "denied"] }).notNull().default("pending"),
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    intervalS: integer("interval_s").notNull(),
    lastPollAt: text("last_poll_at"),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
  },
  (t) => [uniqueIndex("device_codes_device_code").on(t.deviceCodeHash), uniqueIndex("device_codes_user_code").on(t.userCode)],
);

export const invitations = pgTable(
  "invitations",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    lookup: text("lookup").notNull(),
    secretHash: text("secret_hash").notNull(),
    settings: text("settings").notNull(),
    note: text("note").notNull().default(""),
    createdBy: integer("created_by").references(() => users.id, { onDelete: "set null" }),
    createdAt: text("created_at").notNull(),
    expiresAt: text("expires_at").notNull(),
    usedAt: text("used_at"),
    usedBy: integer("used_by").references(() => users.id, { onDelete: "set null" }),
    usedUsername: text("used_username"),
  },
  (t) => [uniqueIndex("invitations_lookup").on(t.lookup)],
);

export const privateNames = pgTable(
  "private_names",
  {
    ownerId: integer("owner_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    protocol: text("protocol", { enum: ["http", "tcp", "udp"] }).notNull(),
    shares: text("shares").notNull().default("[]"),
    localPort: integer("local_port"),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.ownerId, t.name] })],
);

/** See schema.ts. */
export const trafficPolicies = pgTable(
  "traffic_policies",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
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

/** See schema.ts. */
export const webhooks = pgTable(
  "webhooks",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    url: text("url").notNull(),
    description: text("description").notNull().default(""),
    events: text("events").notNull(),
    // boolean, not 0/1 integer: PostgreSQL has the type
    enabled: boolean("enabled").notNull().default(true),
    userId: integer("user_id").references(() => users.id, { onDelete: "cascade" }),
    origin: text("origin", { enum: ["api", "portal", "flag"] }).notNull().default("api"),
    secret: text("secret").notNull(),
    previousSecret: text("previous_secret"),
    previousUntil: text("previous_until"),
    // bigint: a count that only grows
    dropped: bigint("dropped", { mode: "number" }).notNull().default(0),
    leaseNode: text("lease_node"),
    // bigint: milliseconds since 1970 pass 2^31
    leaseUntilMs: bigint("lease_until_ms", { mode: "number" }).notNull().default(0),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [index("webhooks_user").on(t.userId)],
);

/** See schema.ts. */
export const events = pgTable(
  "events",
  {
    // bigint: a server's events over its life pass 2^31
    id: bigint("id", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    uid: text("uid").notNull(),
    type: text("type").notNull(),
    at: text("at").notNull(),
    userId: integer("user_id"),
    data: text("data").notNull(),
    dedupe: text("dedupe"),
  },
  (t) => [uniqueIndex("events_uid").on(t.uid), uniqueIndex("events_dedupe").on(t.dedupe), index("events_at").on(t.at)],
);

/** See schema.ts. */
export const webhookDeliveries = pgTable(
  "webhook_deliveries",
  {
    // bigint, as events' ids
    id: bigint("id", { mode: "number" }).primaryKey().generatedByDefaultAsIdentity(),
    webhookId: integer("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    eventId: bigint("event_id", { mode: "number" })
      .notNull()
      .references(() => events.id, { onDelete: "cascade" }),
    status: text("status", { enum: ["pending", "delivered", "failed", "dropped"] }).notNull().default("pending"),
    attempts: integer("attempts").notNull().default(0),
    createdAt: text("created_at").notNull(),
    // bigint: milliseconds since 1970 pass 2^31
    nextAttemptMs: bigint("next_attempt_ms", { mode: "number" }),
    giveUpMs: bigint("give_up_ms", { mode: "number" }).notNull(),
    lastAttemptAt: text("last_attempt_at"),
    responseStatus: integer("response_status"),
    durationMs: integer("duration_ms"),
    error: text("error"),
    deliveredAt: text("delivered_at"),
  },
  (t) => [
    index("webhook_deliveries_webhook").on(t.webhookId, t.status, t.id),
    index("webhook_deliveries_due").on(t.status, t.nextAttemptMs),
    index("webhook_deliveries_event").on(t.eventId),
  ],
);

/** See schema.ts. */
export const tokenConfigs = pgTable(
  "token_configs",
  {
    id: integer("id").primaryKey().generatedByDefaultAsIdentity(),
    tokenId: integer("token_id")
      .notNull()
      .references(() => tokens.id, { onDelete: "cascade" }),
    tunnels: text("tunnels").notNull(),
    version: integer("version").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("token_configs_token").on(t.tokenId)],
);

/** See schema.ts. */
export const liveAgents = pgTable(
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
    tokenId: integer("token_id").notNull(),
    connectedAt: text("connected_at").notNull(),
    remote: text("remote").notNull(),
    state: text("state").notNull(),
  },
  (t) => [index("live_agents_node").on(t.nodeId), index("live_agents_user").on(t.userId)],
);
