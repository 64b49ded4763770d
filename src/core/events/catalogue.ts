/**
 * Every event burrow delivers to webhooks, in one table: its type (a stable
 * name, `<subject>.<what>`), what it says, the shape of its `data` as a
 * valibot schema, and an example. `emit()` takes only these types, with
 * data of their shape (the type checker holds every call to it), and
 * docs/reference/events.md is made from this table; a test checks each
 * example against its schema and that each type is emitted somewhere.
 *
 * A delivery's body is `{"id", "type", "timestamp", "data"}`: the event's
 * id (also the `webhook-id` header), its type, when it happened (ISO 8601
 * UTC) and this data.
 */
import * as v from "valibot";

const id = v.pipe(v.number(), v.integer());
const count = v.pipe(v.number(), v.integer(), v.minValue(0));
const text = v.string();
const maybe = <S extends v.GenericSchema>(s: S) => v.nullable(s);

/** Who a tunnel, token or quota event concerns: the user, and the device token when there is one. */
const owner = { user_id: id, username: text };
/** The device: its token, or (an `ssh -R` session's) null and the SSH key. */
const device = { token_id: maybe(id), ssh_key_id: maybe(id) };
const tunnel = {
  ...owner,
  ...device,
  /** The registry's id of the tunnel, the same in its online and offline events. */
  tunnel_id: text,
  /** http, tcp, tls or udp. */
  kind: text,
  /** How visitors reach it (https://name.domain, domain:port), or owner/name for a private tunnel. */
  address: text,
  /** The node that holds it (its --node-id; "local" on one node). */
  node: text,
};
const token = { ...owner, token_id: id, device_name: text };
const quota = { ...owner, used: count, limit: count, period: text, percent: count };
const certificate = { names: v.array(text) };
const alert = {
  /** One sentence an operator reads: what is wrong and where to look. */
  message: text,
  severity: v.picklist(["warning", "critical"]),
  /** The node that noticed it. */
  node: text,
};

export interface EventSpec {
  about: string;
  /** A user's own webhooks (the portal's) get it when it concerns them. */
  user: boolean;
  data: v.ObjectSchema<v.ObjectEntries, undefined>;
  example: Record<string, unknown>;
}

const TUNNEL_EXAMPLE = { user_id: 7, username: "alice", token_id: 12, ssh_key_id: null, tunnel_id: "5b0f4a2e-8c1d-4e55-9f0a-3c2b1d7e6a90", kind: "http", address: "https://myapp.tunnels.example.com", node: "local" };

export const EVENT_CATALOGUE = {
  "tunnel.online": {
    about: "A tunnel went live: its agent connected (or came back within the grace period) and heard READY.",
    user: true,
    data: v.object(tunnel),
    example: TUNNEL_EXAMPLE,
  },
  "tunnel.offline": {
    about: "A tunnel's agent went away (closed, lost, revoked, or the server stopping): the bytes both ways and the seconds it was live. Its name stays held for the grace period; the tunnel.online of an agent that comes back follows.",
    user: true,
    data: v.object({ ...tunnel, bytes_in: count, bytes_out: count, duration_s: count }),
    example: { ...TUNNEL_EXAMPLE, bytes_in: 52_311, bytes_out: 1_048_576, duration_s: 3_600 },
  },
  "tunnel.refused": {
    about: "An agent's handshake was refused by the rules, or a tunnel it added to its live connection was, with the code it was told (docs/reference/codes.md); user and token are null when the token was not one of ours; `ssh_key_id` names the key of an `ssh -R` session, whose `token_id` is null.",
    user: true,
    data: v.object({ code: text, message: text, user_id: maybe(id), username: maybe(text), ...device, address: text, node: text }),
    example: { code: "TUNNEL_LIMIT", message: "this user may have at most 2 tunnels", user_id: 7, username: "alice", token_id: 12, ssh_key_id: null, address: "203.0.113.9", node: "local" },
  },
  "token.created": {
    about: "A device token was made: by an admin (`by`: admin), by its user on the portal (portal) or by approving a `burrow login` (device-login).",
    user: true,
    data: v.object({ ...token, by: v.picklist(["admin", "portal", "device-login"]) }),
    example: { user_id: 7, username: "alice", token_id: 12, device_name: "laptop", by: "admin" },
  },
  "token.revoked": {
    about: "A device token was revoked (by an admin or its user): its tunnels are closed.",
    user: true,
    data: v.object(token),
    example: { user_id: 7, username: "alice", token_id: 12, device_name: "laptop" },
  },
  "token.first_use": {
    about: "A device token was used for the first time: its first handshake that succeeded, from `address`.",
    user: true,
    data: v.object({ ...token, address: text }),
    example: { user_id: 7, username: "alice", token_id: 12, device_name: "laptop", address: "203.0.113.9" },
  },
  "user.created": {
    about: "A user was made: by an admin, an invitation or a first company sign-in.",
    user: false,
    data: v.object({ ...owner, role: text }),
    example: { user_id: 7, username: "alice", role: "user" },
  },
  "user.updated": {
    about: "A user's settings changed: the names of the fields that changed (never their values for a password).",
    user: false,
    data: v.object({ ...owner, fields: v.array(text) }),
    example: { user_id: 7, username: "alice", fields: ["max_tunnels", "allowed_protocols"] },
  },
  "user.disabled": {
    about: "A user was disabled: their sessions, keys and tunnels are closed (a user.updated with the field enabled comes with it).",
    user: false,
    data: v.object(owner),
    example: { user_id: 7, username: "alice" },
  },
  "user.deleted": {
    about: "A user was deleted, with their tokens, reserved subdomains, hostnames and webhooks.",
    user: false,
    data: v.object(owner),
    example: { user_id: 7, username: "alice" },
  },
  "quota.warning": {
    about: "A user's traffic reached 80 % of their quota for the period; said once a period.",
    user: true,
    data: v.object(quota),
    example: { user_id: 7, username: "alice", used: 858_993_459, limit: 1_073_741_824, period: "monthly", percent: 80 },
  },
  "quota.exceeded": {
    about: "A user's traffic reached their quota: their tunnels are closed with TRAFFIC_EXCEEDED until the next period; said once a period.",
    user: true,
    data: v.object(quota),
    example: { user_id: 7, username: "alice", used: 1_073_741_824, limit: 1_073_741_824, period: "monthly", percent: 100 },
  },
  "hostname.verified": {
    about: "A custom hostname was verified (its TXT record found, or an admin's word): tunnels may be reached by it now.",
    user: false,
    data: v.object({ ...owner, hostname_id: id, hostname: text }),
    example: { user_id: 7, username: "alice", hostname_id: 3, hostname: "demo.acme.com" },
  },
  "certificate.issued": {
    about: "A certificate was issued or renewed by the ACME CA.",
    user: false,
    data: v.object({ ...certificate, not_after: text }),
    example: { names: ["*.tunnels.example.com", "tunnels.example.com"], not_after: "2026-10-01T12:00:00.000Z" },
  },
  "certificate.failed": {
    about: "An order for a certificate failed; it is tried again with backoff. `not_after` is the end of the certificate in use, null when there is none.",
    user: false,
    data: v.object({ ...certificate, code: text, message: text, not_after: maybe(text) }),
    example: { names: ["*.tunnels.example.com", "tunnels.example.com"], code: "CHALLENGE_FAILED", message: "the CA could not read the TXT record", not_after: "2026-07-10T12:00:00.000Z" },
  },
  "certificate.expiring": {
    about: "A certificate in use ends within 14 days and has not been renewed; said once a day per certificate.",
    user: false,
    data: v.object({ ...certificate, not_after: text, days_left: count }),
    example: { names: ["*.tunnels.example.com", "tunnels.example.com"], not_after: "2026-07-10T12:00:00.000Z", days_left: 9 },
  },
  "node.up": {
    about: "A node joined the cluster (PostgreSQL): it registered and answers.",
    user: false,
    data: v.object({ node: text, url: maybe(text) }),
    example: { node: "edge-2", url: "http://10.0.0.12:8080" },
  },
  "node.down": {
    about: "A node was taken for dead: its heartbeat is older than --node-expiry; its tunnels are free for other nodes. Said by the node that swept it.",
    user: false,
    data: v.object({ node: text, last_heartbeat: text }),
    example: { node: "edge-2", last_heartbeat: "2026-07-01T12:00:00.000Z" },
  },
  "login.failed_burst": {
    about: "Sign-ins for one username, or from one address, failed enough times to be locked out (5 for a username, 20 for an address within 15 minutes): someone may be guessing.",
    user: false,
    data: v.object({ address: text, username: text, failures: count, locked_for_s: count }),
    example: { address: "198.51.100.23", username: "admin", failures: 5, locked_for_s: 30 },
  },
  "policy.rate_limited": {
    about: "A traffic policy's rate-limit action refused requests to a tunnel; sampled: at most one event per tunnel and minute, `refused` counting them all.",
    user: true,
    data: v.object({ ...owner, address: text, refused: count, node: text }),
    example: { user_id: 7, username: "alice", address: "https://myapp.tunnels.example.com", refused: 312, node: "local" },
  },
  "webhook.dropped": {
    about:
      "A webhook's oldest deliveries were dropped unsent: more than --webhook-max-pending were waiting (its receiver down or slow for long). Written with the drop; the webhook that lost them gets it when it subscribes to it (`*` does), after the deliveries still waiting, so a receiver that comes back learns which events it missed: `from` and `to` are when the first and the last of them happened. `dropped_total` counts every drop of the webhook since it was made.",
    user: true,
    data: v.object({ webhook_id: id, user_id: maybe(id), dropped: count, dropped_total: count, max_pending: count, from: text, to: text }),
    example: { webhook_id: 4, user_id: null, dropped: 250, dropped_total: 1250, max_pending: 10_000, from: "2026-07-01T09:12:00.000Z", to: "2026-07-01T09:15:30.000Z" },
  },
  "alert.node_down": {
    about: "An alert: a node of the cluster stopped answering (its heartbeat is older than --node-expiry).",
    user: false,
    data: v.object({ ...alert, down: text }),
    example: { message: "node edge-2 is down: no heartbeat since 2026-07-01T12:00:00.000Z", severity: "critical", node: "edge-1", down: "edge-2" },
  },
  "alert.certificate_renewal_failing": {
    about: "An alert: a certificate ends within 14 days and its renewal failed; once a day per certificate while it lasts.",
    user: false,
    data: v.object({ ...alert, ...certificate, not_after: text, code: text }),
    example: {
      message: "the certificate for *.tunnels.example.com ends in 9 days and its renewal failed: CHALLENGE_FAILED",
      severity: "critical",
      node: "local",
      names: ["*.tunnels.example.com"],
      not_after: "2026-07-10T12:00:00.000Z",
      code: "CHALLENGE_FAILED",
    },
  },
  "alert.database_unavailable": {
    about: "An alert: the database does not answer or refuses writes. Sent straight to --alert-webhook (the outbox is in that database), once when it starts and again every 10 minutes while it lasts.",
    user: false,
    data: v.object({ ...alert, since: text }),
    example: { message: "the database is unavailable since 2026-07-01T12:00:00.000Z: tunnels up keep serving, admin writes and handshakes are refused", severity: "critical", node: "local", since: "2026-07-01T12:00:00.000Z" },
  },
  "alert.descriptor_pressure": {
    about: "An alert: the process holds more than 80 % of its open-file limit; new visitors may soon be refused.",
    user: false,
    data: v.object({ ...alert, open: count, limit: count }),
    example: { message: "open files at 85 % of the limit (55705 of 65536): raise LimitNOFILE or add a node", severity: "warning", node: "local", open: 55_705, limit: 65_536 },
  },
  "alert.outbox_backing_up": {
    about: "An alert: deliveries are waiting in the outbox past --alert-outbox-pending (a webhook's receiver down or slow); past --webhook-max-pending a webhook's oldest are dropped.",
    user: false,
    data: v.object({ ...alert, pending: count, threshold: count }),
    example: { message: "1250 webhook deliveries are waiting: a receiver is down or slow (GET /api/webhooks shows which)", severity: "warning", node: "local", pending: 1_250, threshold: 1_000 },
  },
} as const satisfies Record<string, EventSpec>;

export type EventType = keyof typeof EVENT_CATALOGUE;
export type EventData<T extends EventType> = v.InferInput<(typeof EVENT_CATALOGUE)[T]["data"]>;

export const EVENT_TYPES = Object.keys(EVENT_CATALOGUE) as EventType[];

/** The types a user's own webhook may have: those about their tunnels, tokens and quota. */
export const USER_EVENT_TYPES: readonly EventType[] = EVENT_TYPES.filter((t) => EVENT_CATALOGUE[t].user);

export const isEventType = (s: string): s is EventType => Object.hasOwn(EVENT_CATALOGUE, s);
