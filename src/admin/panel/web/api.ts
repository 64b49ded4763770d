/**
 * The admin REST API as the panel sees it: the same endpoints, cookie and
 * errors a script uses (docs/admin-api.md). Every failure becomes an
 * ApiError whose message is a sentence a person can read; nothing is
 * swallowed here.
 */
export type { TrafficPeriod } from "../../../ui/format.ts";
import type { TunnelKind } from "../../../protocol/kinds.ts";
import type { TrafficPeriod } from "../../../ui/format.ts";
export type { ServerInfo } from "../../../ui/format.ts";
import type { ServerInfo } from "../../../ui/format.ts";
export { messageOf } from "../../../ui/errors.ts";
import { ApiError, jsonClient } from "../../../ui/json-client.ts";
import type { TunnelsConfig } from "../../../ui/device-config.ts";
import type { Delivery, Webhook, WebhookWithSecret } from "../../../ui/components/webhook-types.ts";

/** A user's SSH public key (the SSH gateway's device). */
export interface SshKey {
  id: number;
  user_id: number;
  name: string;
  key: string;
  type: string;
  fingerprint: string;
  created_at: string;
  last_used: string | null;
}

export interface Me {
  id: number;
  username: string;
  role: string;
}

export interface User extends Me {
  enabled: boolean;
  max_tunnels: number;
  allowed_protocols: string;
  traffic_limit: number;
  traffic_period: TrafficPeriod;
  max_devices: number;
  skip_warning: boolean;
  can_use_proxy: boolean;
  /** May share private tunnels. */
  can_share?: boolean;
  /** Every tunnel must carry basic auth or OIDC (AUTH_REQUIRED otherwise). */
  require_auth?: boolean;
  /** Visitors of every tunnel must come from one of these; [] = anywhere. */
  allow_cidrs?: string[];
  created_at?: string;
  updated_at?: string;
}

export interface UserDetails {
  user: User;
  traffic_used: number;
  active_tokens: number;
}

export interface Token {
  id: number;
  user_id: number;
  device_name: string;
  enabled: boolean;
  created_at: string;
  last_used: string | null;
}

/** A connected agent (GET /api/agents). */
export interface Agent {
  id: string;
  node: string | null;
  user_id: number;
  username: string;
  /** null for a session of the SSH gateway, whose device is the key of ssh_key_id. */
  token_id: number | null;
  ssh_key_id?: number;
  agent: string | null;
  os: string | null;
  arch: string | null;
  started_at: string | null;
  connected_at: string;
  remote: string;
  transport: string;
  tunnels: { id: string; name: string | null; protocol: string; url: string; source: string | null }[];
  connects: string | null;
  config: { remote: boolean; version: number | null; error: string | null };
  last_error: { message: string; at: string } | null;
  manage: { restart: boolean; update: boolean } | null;
}

export interface NewToken {
  token: string;
  token_id: number;
  message: string;
}

export interface Domain {
  id: number;
  subdomain: string;
  user_id: number;
  username: string;
  created_at: string;
}

/** A user's own hostname and how it is proved (GET /api/hostnames). */
export interface Hostname {
  id: number;
  hostname: string;
  user_id: number;
  username: string;
  verified: boolean;
  verification: { type: "TXT"; name: string; value: string };
  created_at: string;
  verified_at: string | null;
}

export interface ActiveTunnel {
  subdomain?: string;
  hostname?: string;
  /** A pool member, and whether it takes new requests. */
  pool?: true;
  in_rotation?: boolean;
  port?: number;
  /** A private tunnel: reached with burrow connect <target> by its owner and `shares`; `connected` of them now. */
  private?: { target: string; shares: string[]; connected: number };
  protocol: TunnelKind;
  user_id: number;
  username: string;
  token_id: number;
  connected_at: string;
  bytes_in: number;
  bytes_out: number;
}

export interface DayTraffic {
  user_id?: number;
  date: string;
  bytes_in: number;
  bytes_out: number;
  total: number;
}

export interface UserTraffic {
  user_id: number;
  username: string;
  bytes_in: number;
  bytes_out: number;
  total: number;
}

export interface Dashboard {
  total_users: number;
  active_tunnels: number;
  traffic_today: number;
  top_users: UserTraffic[];
}

/** How the public port gets its certificates (docs/admin-api.md, GET /api/certificates). */
export type CertificateMode = "acme" | "files" | "off";

export interface CertificateError {
  /** A stable code, e.g. RATE_LIMITED or CHALLENGE_FAILED. */
  code: string;
  message: string;
  at: string;
  /** When the CA will talk again, when it said so. */
  retry_after?: string;
}

export interface Certificate {
  id: string;
  names: string[];
  issuer: string | null;
  not_before: string | null;
  not_after: string | null;
  last_error: CertificateError | null;
  next_renewal: string | null;
}

export interface CertificateReport {
  mode: CertificateMode;
  directory?: string;
  certificates: Certificate[];
}

/** One entry of the audit log (docs/admin-api.md, GET /api/audit). */
export interface AuditEntry {
  id: number;
  at: string;
  user_id: number | null;
  username: string | null;
  key_id: number | null;
  token_id: number | null;
  address: string;
  action: string;
  target: string | null;
  outcome: "ok" | "failed" | "refused";
  code: string | null;
  details: Record<string, unknown> | null;
  count: number;
}

export interface AuditFilter {
  user_id?: number;
  action?: string;
  before_id?: number;
  limit?: number;
}

/** An admin API key as listed: never its secret. */
export interface AdminKey {
  id: number;
  name: string;
  user_id: number;
  username: string;
  status: "active" | "expired" | "revoked";
  created_at: string;
  expires_at: string | null;
  last_used: string | null;
  revoked_at: string | null;
}

export type { Delivery, Webhook, WebhookWithSecret } from "../../../ui/components/webhook-types.ts";

export interface NewAdminKey {
  key: string;
  key_id: number;
  name: string;
  created_at: string;
  expires_at: string | null;
  message: string;
}

/** An operator's traffic policy (/api/policies): what it covers, and its document as written. */
export interface TrafficPolicy {
  id: number;
  name: string;
  scope: PolicyScope;
  user_id: number | null;
  username: string | null;
  hostname: string | null;
  /** The document, YAML or JSON, as written. */
  policy: string;
  created_at: string;
  updated_at: string;
}

export type PolicyScope = "server" | "user" | "hostname";

/** What the panel sends to make or change a policy. */
export interface PolicyBody {
  name: string;
  scope: PolicyScope;
  user_id?: number;
  hostname?: string;
  policy: string;
}

/** A failed call: the server's own words when it gave some, else what went wrong on the way. */
/** What a user made by an invitation gets. */
export interface InvitationSettings {
  role?: "user" | "admin";
  max_tunnels?: number;
  allowed_protocols?: string;
  traffic_limit?: number;
  traffic_period?: TrafficPeriod;
  max_devices?: number;
  skip_warning?: boolean;
  can_use_proxy?: boolean;
}

export interface Invitation extends Required<InvitationSettings> {
  id: number;
  note: string;
  status: "pending" | "used" | "expired";
  created_by: number | null;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  used_by: number | null;
  used_username: string | null;
}

export interface NewInvitation extends Invitation {
  url: string;
  message: string;
}

const client = jsonClient((path) => path === "/api/auth/login");
const call = client.call;
export const whenSessionLost = client.whenSessionLost;
export { ApiError };

const id = (n: number) => encodeURIComponent(String(n));

export const api = {
  login: (username: string, password: string) => call<{ user: Me }>("POST", "/api/auth/login", { username, password }),
  logout: () => call<{ status: string }>("POST", "/api/auth/logout"),
  me: () => call<Me>("GET", "/api/auth/me"),
  server: () => call<ServerInfo>("GET", "/api/server"),
  certificates: () => call<CertificateReport>("GET", "/api/certificates"),

  users: () => call<User[]>("GET", "/api/users"),
  user: (userId: number) => call<UserDetails>("GET", `/api/users/${id(userId)}`),
  createUser: (body: Record<string, unknown>) => call<User>("POST", "/api/users", body),
  updateUser: (userId: number, body: Record<string, unknown>) => call<User>("PUT", `/api/users/${id(userId)}`, body),
  deleteUser: (userId: number) => call<{ status: string }>("DELETE", `/api/users/${id(userId)}`),

  tokens: (userId: number) => call<Token[]>("GET", `/api/users/${id(userId)}/tokens`),
  createToken: (userId: number, deviceName: string) =>
    call<NewToken>("POST", `/api/users/${id(userId)}/tokens`, { device_name: deviceName }),
  revokeToken: (tokenId: number) => call<{ status: string }>("DELETE", `/api/tokens/${id(tokenId)}`),
  sshKeys: (userId: number) => call<SshKey[]>("GET", `/api/users/${id(userId)}/ssh-keys`),
  addSshKey: (userId: number, key: string, name?: string) => call<SshKey>("POST", `/api/users/${id(userId)}/ssh-keys`, name ? { key, name } : { key }),
  removeSshKey: (keyId: number) => call<{ status: string }>("DELETE", `/api/ssh-keys/${id(keyId)}`),
  tokenConfig: (tokenId: number) => call<TunnelsConfig>("GET", `/api/tokens/${id(tokenId)}/config`),
  setTokenConfig: (tokenId: number, tunnels: Record<string, unknown>) => call<TunnelsConfig>("PUT", `/api/tokens/${id(tokenId)}/config`, { tunnels }),

  domains: () => call<Domain[]>("GET", "/api/domains"),
  reserve: (subdomain: string, userId: number) => call<Domain>("POST", "/api/domains", { subdomain, user_id: userId }),
  release: (domainId: number) => call<{ status: string }>("DELETE", `/api/domains/${id(domainId)}`),

  hostnames: (userId: number) => call<Hostname[]>("GET", `/api/hostnames?user_id=${id(userId)}`),
  addHostname: (hostname: string, userId: number, verified: boolean) => call<Hostname>("POST", "/api/hostnames", { hostname, user_id: userId, verified }),
  verifyHostname: (hostnameId: number) => call<Hostname>("POST", `/api/hostnames/${id(hostnameId)}/verify`),
  deleteHostname: (hostnameId: number) => call<{ status: string }>("DELETE", `/api/hostnames/${id(hostnameId)}`),

  dashboard: () => call<Dashboard>("GET", "/api/dashboard"),
  activeTunnels: () => call<ActiveTunnel[]>("GET", "/api/tunnels/active"),
  agents: () => call<Agent[]>("GET", "/api/agents"),
  askAgent: (id: string, action: "restart" | "update") => call<{ status: "accepted"; message: string }>("POST", `/api/agents/${encodeURIComponent(id)}/${action}`),
  userDays: (userId: number, days = 30) => call<DayTraffic[]>("GET", `/api/analytics/traffic?user_id=${id(userId)}&days=${days}`),
  perUser: (days = 30) => call<UserTraffic[]>("GET", `/api/analytics/traffic?days=${days}`),

  audit: (filter: AuditFilter) => {
    const query = new URLSearchParams();
    for (const [k, v] of Object.entries(filter)) if (v !== undefined) query.set(k, String(v));
    return call<AuditEntry[]>("GET", `/api/audit?${query}`);
  },

  invitations: () => call<Invitation[]>("GET", "/api/invitations"),
  createInvitation: (body: InvitationSettings & { expires_in_hours?: number; note?: string }) => call<NewInvitation>("POST", "/api/invitations", body),
  deleteInvitation: (invitationId: number) => call<{ status: string }>("DELETE", `/api/invitations/${id(invitationId)}`),
  webhooks: () => call<Webhook[]>("GET", "/api/webhooks"),
  createWebhook: (body: { url: string; events: string[]; description?: string }) => call<WebhookWithSecret>("POST", "/api/webhooks", body),
  updateWebhook: (webhookId: number, body: Partial<Pick<Webhook, "url" | "events" | "description" | "enabled">>) => call<Webhook>("PUT", `/api/webhooks/${id(webhookId)}`, body),
  deleteWebhook: (webhookId: number) => call<{ status: string }>("DELETE", `/api/webhooks/${id(webhookId)}`),
  rotateWebhook: (webhookId: number, overlapSeconds: number) => call<WebhookWithSecret>("POST", `/api/webhooks/${id(webhookId)}/rotate`, { overlap_seconds: overlapSeconds }),
  deliveries: (webhookId: number, limit = 10) => call<Delivery[]>("GET", `/api/webhooks/${id(webhookId)}/deliveries?limit=${limit}`),
  retryDelivery: (webhookId: number, deliveryId: number) => call<Delivery>("POST", `/api/webhooks/${id(webhookId)}/deliveries/${id(deliveryId)}/retry`),
  keys: () => call<AdminKey[]>("GET", "/api/keys"),
  createKey: (name: string, expiresInDays?: number) =>
    call<NewAdminKey>("POST", "/api/keys", expiresInDays === undefined ? { name } : { name, expires_in_days: expiresInDays }),
  revokeKey: (keyId: number) => call<{ status: string }>("DELETE", `/api/keys/${id(keyId)}`),

  policies: () => call<TrafficPolicy[]>("GET", "/api/policies"),
  createPolicy: (body: PolicyBody) => call<TrafficPolicy>("POST", "/api/policies", body),
  updatePolicy: (policyId: number, body: PolicyBody) => call<TrafficPolicy>("PUT", `/api/policies/${id(policyId)}`, body),
  deletePolicy: (policyId: number) => call<{ status: string }>("DELETE", `/api/policies/${id(policyId)}`),
};

