/** How core's records look in the admin API (snake_case, as the spec names them). */
import type { CustomHostname } from "../core/hostnames.ts";
import type { OperatorPolicyRecord } from "../core/traffic-policies.ts";
import type { TokenConfig } from "../core/token-configs.ts";
import { reachedByPort } from "../protocol/kinds.ts";
import { challengeName } from "../validate/hostname.ts";
import type { DayTraffic, UserTraffic } from "../core/traffic.ts";
import type { ReservedSubdomain } from "../core/domains.ts";
import type { SshKeyRow, TokenRow, UserRow } from "../db/schema.ts";
import { deviceJson } from "../core/device-ids.ts";
import { cidrs } from "../validate/fields.ts";
import { utcDateTime } from "../core/clock.ts";
import type { ActiveTunnel, AgentInfo } from "../core/live.ts";
import type { Invitation } from "../core/invitations.ts";

export const userJson = (u: UserRow) => ({
  id: u.id,
  username: u.username,
  role: u.role,
  enabled: u.enabled,
  max_tunnels: u.maxTunnels,
  allowed_protocols: u.allowedProtocols,
  traffic_limit: u.trafficLimit,
  traffic_period: u.trafficPeriod,
  max_devices: u.maxDevices,
  skip_warning: u.skipWarning,
  can_use_proxy: u.canUseProxy,
  can_share: u.canShare,
  require_auth: u.requireAuth,
  allow_cidrs: cidrs(u.allowCidrs),
  created_at: u.createdAt,
  updated_at: u.updatedAt,
});

export const meJson = (u: UserRow) => ({ id: u.id, username: u.username, role: u.role });

export const tokenJson = (t: TokenRow) => ({
  id: t.id,
  user_id: t.userId,
  device_name: t.deviceName,
  enabled: t.enabled,
  created_at: t.createdAt,
  last_used: t.lastUsed,
});

/** An SSH key: its public half, which is all that is kept. */
export const sshKeyJson = (k: SshKeyRow) => ({
  id: k.id,
  user_id: k.userId,
  name: k.name,
  key: k.publicKey,
  type: k.publicKey.slice(0, k.publicKey.indexOf(" ")),
  fingerprint: k.fingerprint,
  created_at: k.createdAt,
  last_used: k.lastUsed,
});

export const domainJson = (d: ReservedSubdomain) => ({
  id: d.id,
  subdomain: d.subdomain,
  user_id: d.userId,
  username: d.username,
  created_at: d.createdAt,
});

export const hostnameJson = (h: CustomHostname) => ({
  id: h.id,
  hostname: h.hostname,
  user_id: h.userId,
  username: h.username,
  verified: h.verified,
  verification: { type: "TXT" as const, name: challengeName(h.hostname), value: h.token },
  created_at: h.createdAt,
  verified_at: h.verifiedAt,
});

export const policyJson = (p: OperatorPolicyRecord) => ({
  id: p.id,
  name: p.name,
  scope: p.scope,
  user_id: p.userId,
  username: p.username,
  hostname: p.hostname,
  policy: p.document,
  created_at: p.createdAt,
  updated_at: p.updatedAt,
});

export const dayTrafficJson = (d: DayTraffic) => ({
  user_id: d.userId,
  date: d.date,
  bytes_in: d.bytesIn,
  bytes_out: d.bytesOut,
  total: d.total,
});

export const userTrafficJson = (u: UserTraffic) => ({
  user_id: u.userId,
  username: u.username,
  bytes_in: u.bytesIn,
  bytes_out: u.bytesOut,
  total: u.total,
});

/** A live tunnel: its port (tcp, udp) or subdomain, its hostname and place in a pool when it has them. */
export const activeTunnelJson = (t: ActiveTunnel) => ({
  ...(t.private ? { private: t.private } : reachedByPort(t.protocol) ? { port: t.port } : { subdomain: t.subdomain }),
  ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
  ...(t.pool ? { pool: true, in_rotation: t.pool.inRotation } : {}),
  protocol: t.protocol,
  user_id: t.userId,
  username: t.username,
  // the device: a token, or an SSH key (core/devices.ts), whose tunnels have no token
  ...deviceJson(t.tokenId),
  connected_at: utcDateTime(t.connectedAt),
  bytes_in: t.bytesIn,
  bytes_out: t.bytesOut,
});

/** An invitation: what its user gets, and how it stands (never its secret). */
export const invitationJson = (i: Invitation) => ({
  id: i.id,
  note: i.note,
  role: i.settings.role,
  max_tunnels: i.settings.maxTunnels,
  allowed_protocols: i.settings.allowedProtocols,
  traffic_limit: i.settings.trafficLimit,
  traffic_period: i.settings.trafficPeriod,
  max_devices: i.settings.maxDevices,
  skip_warning: i.settings.skipWarning,
  can_use_proxy: i.settings.canUseProxy,
  status: i.status,
  created_by: i.createdBy,
  created_at: i.createdAt,
  expires_at: i.expiresAt,
  used_at: i.usedAt,
  used_by: i.usedBy,
  used_username: i.usedUsername,
});

/** A device's remote config as the admin API and the portal show it. */
export const tokenConfigJson = (c: TokenConfig) => ({ token_id: c.tokenId, tunnels: c.tunnels, version: c.version, updated_at: c.updatedAt });

/** A connected agent as GET /api/agents lists it. */
export const agentJson = (a: AgentInfo) => ({
  id: a.id,
  node: a.nodeId ?? null,
  user_id: a.userId,
  username: a.username,
  // the device: a token, or the SSH key of an `ssh -R` forward's session (core/devices.ts)
  ...deviceJson(a.tokenId),
  agent: a.agent ?? null,
  os: a.system?.os ?? null,
  arch: a.system?.arch ?? null,
  started_at: a.system?.started ?? null,
  connected_at: a.connectedAt,
  remote: a.remote,
  transport: a.transport,
  tunnels: a.tunnels.map((t) => ({ id: t.id, name: t.name ?? null, protocol: t.protocol, url: t.url, source: t.source ?? null })),
  connects: a.connects ?? null,
  config: { remote: a.config.remote, version: a.config.version ?? null, error: a.config.error ?? null },
  last_error: a.lastError ?? null,
  manage: a.manage ?? null,
});
