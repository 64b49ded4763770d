/**
 * The shapes of the admin API's answers, as valibot schemas: the OpenAPI
 * document (openapi.ts) is made from them, and the tests check real answers
 * against them (strict objects: a field added to a JSON builder in json.ts
 * and not here fails), so the document and the server cannot drift apart.
 */
import * as v from "valibot";
import { AUDIT_ACTIONS } from "../core/audit.ts";
import { KIND_NAMES } from "../protocol/kinds.ts";

const id = v.pipe(v.number(), v.integer(), v.minValue(1));
const count = v.pipe(v.number(), v.integer(), v.minValue(0));
const timestamp = v.pipe(v.string(), v.isoTimestamp());

export const EntryList = <S extends v.GenericSchema>(item: S) => v.array(item);

export const ErrorBody = v.strictObject({ error: v.string() });

export const StatusBody = <S extends string>(status: S) => v.strictObject({ status: v.literal(status) });

export const MeJson = v.strictObject({ id, username: v.string(), role: v.picklist(["user", "admin"]) });

export const LoginJson = v.strictObject({ user: MeJson });

export const UserJson = v.strictObject({
  id,
  username: v.string(),
  role: v.picklist(["user", "admin"]),
  enabled: v.boolean(),
  max_tunnels: count,
  allowed_protocols: v.string(),
  traffic_limit: count,
  traffic_period: v.picklist(["daily", "monthly", "quarterly"]),
  max_devices: count,
  skip_warning: v.boolean(),
  can_use_proxy: v.boolean(),
  can_share: v.boolean(),
  require_auth: v.boolean(),
  allow_cidrs: v.array(v.string()),
  created_at: timestamp,
  updated_at: timestamp,
});

export const UserDetailsJson = v.strictObject({ user: UserJson, traffic_used: count, active_tokens: count });

export const TokenJson = v.strictObject({
  id,
  user_id: id,
  device_name: v.string(),
  enabled: v.boolean(),
  created_at: timestamp,
  last_used: v.nullable(timestamp),
});

export const NewTokenJson = v.strictObject({ token: v.string(), token_id: id, message: v.string() });

export const SshKeyJson = v.strictObject({
  id,
  user_id: id,
  name: v.string(),
  /** "<type> <base64>", as a .pub file has it without its comment. */
  key: v.string(),
  type: v.picklist(["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"]),
  /** As `ssh-keygen -l` prints it: "SHA256:...". */
  fingerprint: v.pipe(v.string(), v.startsWith("SHA256:")),
  created_at: timestamp,
  last_used: v.nullable(timestamp),
});

/** A device's remote config (GET/PUT /api/tokens/:id/config): burrow.yml's `tunnels:` map, its version (0: never set) and when it was set. */
export const TokenConfigJson = v.strictObject({
  token_id: id,
  tunnels: v.record(v.string(), v.record(v.string(), v.unknown())),
  version: count,
  updated_at: v.nullable(timestamp),
});

/** One connected agent (GET /api/agents). */
export const AgentJson = v.strictObject({
  id: v.string(),
  /** Its node (several nodes); null on one. */
  node: v.nullable(v.string()),
  user_id: id,
  username: v.string(),
  /** The token it connected with; null for a session of the SSH gateway (an `ssh -R` forward)... */
  token_id: v.nullable(id),
  /** ...which signed in with this SSH key. */
  ssh_key_id: v.optional(id),
  /** What it said it is ("burrow/1.2.0"); null when it said nothing. */
  agent: v.nullable(v.string()),
  os: v.nullable(v.string()),
  arch: v.nullable(v.string()),
  /** When its process started, as it said. */
  started_at: v.nullable(v.string()),
  connected_at: timestamp,
  remote: v.string(),
  transport: v.string(),
  tunnels: v.array(v.strictObject({ id: v.string(), name: v.nullable(v.string()), protocol: v.string(), url: v.string(), source: v.nullable(v.string()) })),
  /** A connector's session (burrow connect): what it reaches. */
  connects: v.nullable(v.string()),
  config: v.strictObject({ remote: v.boolean(), version: v.nullable(count), error: v.nullable(v.string()) }),
  last_error: v.nullable(v.strictObject({ message: v.string(), at: v.string() })),
  /** Which of the server's asks it takes (its flags); null: none (older agents, burrow-agent). */
  manage: v.nullable(v.strictObject({ restart: v.boolean(), update: v.boolean() })),
});

/** An agent's yes to an ask (POST /api/agents/:id/restart, /update). */
export const AskAcceptedJson = v.strictObject({ status: v.literal("accepted"), message: v.string() });

/** The body of PUT .../config: the map as burrow.yml's `tunnels:` has it; each tunnel is checked as burrow.yml's is (the error names the field). */
export const TokenConfigBody = v.object({
  tunnels: v.record(v.pipe(v.string(), v.maxLength(64)), v.looseObject({ proto: v.string(), addr: v.union([v.string(), v.number()]) })),
});

export const DomainJson = v.strictObject({ id, subdomain: v.string(), user_id: id, username: v.string(), created_at: timestamp });

export const HostnameJson = v.strictObject({
  id,
  hostname: v.string(),
  user_id: id,
  username: v.string(),
  verified: v.boolean(),
  /** What proves it: this TXT record at this name. */
  verification: v.strictObject({ type: v.literal("TXT"), name: v.string(), value: v.string() }),
  created_at: timestamp,
  verified_at: v.nullable(timestamp),
});

export const PolicyJson = v.strictObject({
  id,
  name: v.string(),
  /** What it covers: every tunnel, a user's, or those reached by a hostname (or under a wildcard). */
  scope: v.picklist(["server", "user", "hostname"]),
  user_id: v.nullable(id),
  username: v.nullable(v.string()),
  hostname: v.nullable(v.string()),
  /** The document as written (YAML or JSON). */
  policy: v.string(),
  created_at: timestamp,
  updated_at: timestamp,
});

export const DayTrafficJson = v.strictObject({ user_id: id, date: v.pipe(v.string(), v.isoDate()), bytes_in: count, bytes_out: count, total: count });

export const UserTrafficJson = v.strictObject({ user_id: id, username: v.string(), bytes_in: count, bytes_out: count, total: count });

export const DashboardJson = v.strictObject({
  total_users: count,
  active_tunnels: count,
  traffic_today: count,
  top_users: v.array(UserTrafficJson),
});

export const ActiveTunnelJson = v.strictObject({
  subdomain: v.optional(v.string()),
  /** Its custom hostname, when it has one (http and tls tunnels). */
  hostname: v.optional(v.string()),
  /** A member of a pool (several agents behind one name or port)... */
  pool: v.optional(v.literal(true)),
  /** ...and whether it takes new requests now. */
  in_rotation: v.optional(v.boolean()),
  port: v.optional(v.pipe(v.number(), v.integer())),
  /** A private tunnel: no public port or name; reached with `burrow connect <target>` by its owner and `shares`, `connected` of them now. */
  private: v.optional(v.strictObject({ target: v.string(), shares: v.array(v.string()), connected: count })),
  protocol: v.picklist(KIND_NAMES),
  user_id: id,
  username: v.string(),
  /** The token the tunnel's agent connected with; null for one opened through the SSH gateway... */
  token_id: v.nullable(id),
  /** ...which was opened with this SSH key. */
  ssh_key_id: v.optional(id),
  connected_at: v.pipe(v.string(), v.regex(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/)),
  bytes_in: count,
  bytes_out: count,
});

export const ServerInfoJson = v.strictObject({ domain: v.string(), edge_url: v.string(), tcp_host: v.string() });

const CertificateFailureJson = v.strictObject({
  code: v.string(),
  message: v.string(),
  at: v.string(),
  retry_after: v.optional(v.string()),
});

export const CertificateReportJson = v.strictObject({
  mode: v.picklist(["acme", "files", "off"]),
  directory: v.optional(v.string()),
  certificates: v.array(
    v.strictObject({
      id: v.string(),
      names: v.array(v.string()),
      issuer: v.nullable(v.string()),
      not_before: v.nullable(v.string()),
      not_after: v.nullable(v.string()),
      last_error: v.nullable(CertificateFailureJson),
      next_renewal: v.nullable(v.string()),
    }),
  ),
});

export const ReadyJson = v.strictObject({
  status: v.picklist(["ready", "not ready"]),
  /** The names of the checks that fail. */
  not_ready: v.optional(v.array(v.string())),
});

export const AuditEntryJson = v.strictObject({
  id,
  /** When it happened; for a counted entry, the first of its minute. */
  at: timestamp,
  user_id: v.nullable(id),
  username: v.nullable(v.string()),
  key_id: v.nullable(id),
  token_id: v.nullable(id),
  address: v.string(),
  action: v.picklist(AUDIT_ACTIONS),
  target: v.nullable(v.string()),
  outcome: v.picklist(["ok", "failed", "refused"]),
  code: v.nullable(v.string()),
  details: v.nullable(v.record(v.string(), v.unknown())),
  count: v.pipe(v.number(), v.integer(), v.minValue(1)),
});

export const AdminKeyJson = v.strictObject({
  id,
  name: v.string(),
  user_id: id,
  username: v.string(),
  status: v.picklist(["active", "expired", "revoked"]),
  created_at: timestamp,
  expires_at: v.nullable(timestamp),
  last_used: v.nullable(timestamp),
  revoked_at: v.nullable(timestamp),
});

export const NewAdminKeyJson = v.strictObject({
  key: v.pipe(v.string(), v.startsWith("brk_")),
  key_id: id,
  name: v.string(),
  created_at: timestamp,
  expires_at: v.nullable(timestamp),
  message: v.string(),
});

export const InvitationJson = v.strictObject({
  id,
  note: v.string(),
  role: v.picklist(["user", "admin"]),
  max_tunnels: count,
  allowed_protocols: v.string(),
  traffic_limit: count,
  traffic_period: v.picklist(["daily", "monthly", "quarterly"]),
  max_devices: count,
  skip_warning: v.boolean(),
  can_use_proxy: v.boolean(),
  status: v.picklist(["pending", "used", "expired"]),
  created_by: v.nullable(id),
  created_at: timestamp,
  expires_at: timestamp,
  used_at: v.nullable(timestamp),
  used_by: v.nullable(id),
  used_username: v.nullable(v.string()),
});

export const NewInvitationJson = v.strictObject({ ...InvitationJson.entries, url: v.string(), message: v.string() });
