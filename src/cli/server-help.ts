/** `burrow server --help`: the server's flag table (config/server-flags.ts) in groups, with the variables it reads besides. */
import { SERVER_FLAGS } from "../config/server-flags.ts";
import type { CommandDoc } from "./usage.ts";

export const SERVER_DOC: CommandDoc = {
  name: "server",
  usage: [
    "burrow server [flags]",
    "burrow server init --domain D [flags]   set it up as a systemd service (see init --help)",
    "burrow server backup FILE [--data-dir DIR]   copy its database, running or not (see backup --help)",
    "burrow server dns-check --domain D   check its DNS records from the server (see dns-check --help)",
  ],
  flags: SERVER_FLAGS,
  envSaidOnce: true,
  groups: [
    {
      title: "Flags:",
      flags: [
        "domain",
        "http-port",
        "admin-port",
        "agent-port",
        "tls-port",
        "host",
        "admin-host",
        "data-dir",
        "tcp-ports",
        "system-subdomains",
        "tls-cert",
        "tls-key",
        "response-timeout",
        "max-response-timeout",
        "idle-timeout",
        "max-request-head",
        "max-request-fields",
        "max-read-ahead",
        "tls-hello-timeout",
        "public-url",
        "max-conns-per-ip",
        "max-conns",
        "max-agents-per-ip",
        "trusted-proxies",
        "drain-timeout",
        "handshake-limit",
        "audit-days",
        "log-format",
        "metrics-token",
        "oidc-http-issuers",
        "basic-auth-limit",
        "policy-max-bytes",
        "policy-max-rules",
        "policy-cost-limit",
        "policy-rate-limit-buckets",
        "policy-rate-limit-sync",
        "policy-compile-budget",
        "policy-body-limit",
        "policy-body-timeout",
        "policy-body-memory",
        "dns-resolver",
        "database",
      ],
    },
    {
      title: "The portal, users' own pages on the domain:",
      flags: [
        "portal",
        "device-code-ttl",
        "portal-oidc-issuer",
        "portal-oidc-client-id",
        "portal-oidc-allow-domains",
        "portal-oidc-allow-groups",
        "portal-oidc-invite-only",
        "portal-default-max-tunnels",
        "portal-default-max-devices",
        "portal-default-traffic-limit",
        "portal-default-traffic-period",
        "portal-default-protocols",
      ],
    },
    {
      title: "HTTP/2 for visitors:",
      flags: ["h2", "h2-prior-knowledge", "h2-max-concurrent-streams", "h2-max-header-list", "h2-max-resets-per-second", "h2-max-control-frames", "h2-idle-timeout", "h2-max-queued-response"],
    },
    {
      title: "UDP tunnels:",
      flags: ["udp-ports", "udp-idle", "udp-flows", "udp-rate"],
    },
    {
      title: "Several nodes on one PostgreSQL database (with --database):",
      flags: ["node-id", "node-url", "cluster-secret", "node-expiry", "relay-lookups", "db-pool"],
    },
    {
      title: "Updates:",
      flags: ["update-check", "update-from", "update-check-interval"],
    },
    {
      title: "HTTPS from an ACME CA (Let's Encrypt unless told otherwise):",
      flags: [
        "acme-email",
        "https-port",
        "dns-port",
        "acme-directory",
        "acme-ca-root",
        "acme-names-per-week",
        "acme-retry-min",
        "acme-challenge",
        "dns-rate",
        "dns-total-rate",
      ],
    },
  ],
  after: `Environment:
  BURROW_<FLAG>           any flag above, e.g. BURROW_ADMIN_PORT=4041
  BURROW_ADMIN_USERNAME   first admin's name when the database has no admin (default admin)
  BURROW_ADMIN_PASSWORD   first admin's password; when unset one is generated and printed once
  BURROW_METRICS_TOKEN    the --metrics-token, kept out of the process list
  BURROW_PORTAL_OIDC_CLIENT_SECRET   the portal's client secret at --portal-oidc-issuer`,
};
