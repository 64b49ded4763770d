/**
 * The portal's API as its page sees it: the same endpoints, cookie and
 * errors a script uses (docs/portal.md). Every failure becomes an ApiError
 * whose message is a sentence a person can read.
 */
import type { TunnelsConfig } from "../../ui/device-config.ts";
import type { DayTraffic } from "../../ui/components/chart.tsx";
import type { PrivateKind } from "../../protocol/kinds.ts";
import type { TrafficPeriod } from "../../ui/format.ts";
export { messageOf } from "../../ui/errors.ts";
import { ApiError, jsonClient } from "../../ui/json-client.ts";
import type { WebhooksClient } from "../../ui/components/webhook-types.ts";

export type { DayTraffic };

export interface Me {
  user: {
    id: number;
    username: string;
    role: string;
    max_tunnels: number;
    allowed_protocols: string;
    traffic_limit: number;
    traffic_period: TrafficPeriod;
    max_devices: number;
    has_password: boolean;
    created_at: string;
  };
  traffic_used: number;
  devices: number;
}

export interface Token {
  id: number;
  device_name: string;
  enabled: boolean;
  created_at: string;
  last_used: string | null;
}

export interface SshKey {
  id: number;
  name: string;
  key: string;
  type: string;
  fingerprint: string;
  created_at: string;
  last_used: string | null;
}

/** The server's SSH gateway: its port (null when off) and host keys. */
export interface SshGateway {
  port: number | null;
  host: string;
  host_keys: { type: string; fingerprint: string; known_hosts: string }[];
  command: string | null;
}

export interface NewDevice {
  token: string;
  token_id: number;
  device_name: string;
  command: string;
  message: string;
}

export interface MyTunnel {
  protocol: string;
  subdomain?: string;
  hostname?: string;
  port?: number;
  pool?: boolean;
  in_rotation?: boolean;
  url: string;
  device_name: string | null;
  /** A private tunnel: reached with `burrow connect target` by its owner and `shares`; `connected`: connectors now. */
  private?: { target: string; shares: string[]; connected: number };
  connected_at: string;
  bytes_in: number;
  bytes_out: number;
}

/** A private tunnel another user shares with this one. */
export interface SharedTunnel {
  target: string;
  protocol: PrivateKind;
  online: boolean;
  command: string;
}

export interface Domain {
  id: number;
  subdomain: string;
  created_at: string;
}

export interface Hostname {
  id: number;
  hostname: string;
  verified: boolean;
  verification: { type: "TXT"; name: string; value: string };
}

export interface PendingDevice {
  user_code: string;
  device_name: string;
  address: string;
  created_at: string;
  expires_at: string;
}

export interface Offer {
  note: string;
  max_tunnels: number;
  allowed_protocols: string;
  traffic_limit: number;
  traffic_period: TrafficPeriod;
  max_devices: number;
  expires_at: string;
}

// an invitation's and a sign-in's 401 are wrong credentials, not a session that ended
const client = jsonClient((path) => path === "/_burrow/api/login" || path.startsWith("/_burrow/api/invitation"));
const call = client.call;
export const whenSessionLost = client.whenSessionLost;
export { ApiError };

const enc = encodeURIComponent;

export const api = {
  login: (username: string, password: string) => call<{ user: { id: number; username: string } }>("POST", "/_burrow/api/login", { username, password }),
  logout: () => call<{ status: string }>("POST", "/_burrow/api/logout"),
  me: () => call<Me>("GET", "/_burrow/api/me"),
  tokens: () => call<Token[]>("GET", "/_burrow/api/me/tokens"),
  addDevice: (device_name: string) => call<NewDevice>("POST", "/_burrow/api/me/tokens", { device_name }),
  revoke: (id: number) => call<{ status: string }>("DELETE", `/_burrow/api/me/tokens/${id}`),
  sshKeys: () => call<SshKey[]>("GET", "/_burrow/api/me/ssh-keys"),
  addSshKey: (key: string, name?: string) => call<SshKey>("POST", "/_burrow/api/me/ssh-keys", name ? { key, name } : { key }),
  removeSshKey: (id: number) => call<{ status: string }>("DELETE", `/_burrow/api/me/ssh-keys/${id}`),
  sshGateway: () => call<SshGateway>("GET", "/_burrow/api/ssh"),
  deviceConfig: (id: number) => call<TunnelsConfig>("GET", `/_burrow/api/me/tokens/${id}/config`),
  setDeviceConfig: (id: number, tunnels: Record<string, unknown>) => call<TunnelsConfig>("PUT", `/_burrow/api/me/tokens/${id}/config`, { tunnels }),
  tunnels: () => call<MyTunnel[]>("GET", "/_burrow/api/me/tunnels"),
  shared: () => call<SharedTunnel[]>("GET", "/_burrow/api/me/shared"),
  traffic: (days: number) => call<DayTraffic[]>("GET", `/_burrow/api/me/traffic?days=${days}`),
  domains: () => call<Domain[]>("GET", "/_burrow/api/me/domains"),
  hostnames: () => call<Hostname[]>("GET", "/_burrow/api/me/hostnames"),
  changePassword: (current_password: string, new_password: string) => call<{ status: string }>("PUT", "/_burrow/api/me/password", { current_password, new_password }),
  pendingDevice: (code: string) => call<PendingDevice>("GET", `/_burrow/api/device?user_code=${enc(code)}`),
  approve: (user_code: string) => call<PendingDevice>("POST", "/_burrow/api/device/approve", { user_code }),
  signInOptions: () => call<{ password: true; company: boolean; invite_only: boolean }>("GET", "/_burrow/api/sign-in-options"),
  /** Starts a company sign-in; the browser then goes to the returned address. */
  companySignIn: (body: { to?: string; invitation?: string }) => call<{ url: string }>("POST", "/_burrow/api/oidc/start", body),
  offer: (invitation: string) => call<Offer>("POST", "/_burrow/api/invitation", { invitation }),
  accept: (invitation: string, username: string, password: string) => call<{ user: { id: number; username: string } }>("POST", "/_burrow/api/invitation/accept", { invitation, username, password }),
  deny: (user_code: string) => call<PendingDevice>("POST", "/_burrow/api/device/deny", { user_code }),
};

const hooks = "/_burrow/api/me/webhooks";

/** The user's own webhooks: the admin API's calls on the portal's path. */
export const myWebhooks: WebhooksClient = {
  list: () => call("GET", hooks),
  create: (body) => call("POST", hooks, body),
  update: (webhookId, body) => call("PUT", `${hooks}/${webhookId}`, body),
  remove: (webhookId) => call("DELETE", `${hooks}/${webhookId}`),
  rotate: (webhookId, overlapSeconds) => call("POST", `${hooks}/${webhookId}/rotate`, { overlap_seconds: overlapSeconds }),
  deliveries: (webhookId, limit) => call("GET", `${hooks}/${webhookId}/deliveries?limit=${limit}`),
  retry: (webhookId, deliveryId) => call("POST", `${hooks}/${webhookId}/deliveries/${deliveryId}/retry`),
};
