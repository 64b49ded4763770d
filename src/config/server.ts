/** The server's settings: DEFAULTS, overridden by env BURROW_<FLAG>, overridden by flags; checked once. */
import { hostname } from "node:os";
import { existsSync } from "node:fs";
import * as v from "valibot";
import { parseFlags } from "./flags.ts";
import { SERVER_DEFAULTS, SERVER_FLAGS } from "./server-flags.ts";
import { UsageError } from "../usage-error.ts";
import * as f from "../validate/fields.ts";
import { SUBDOMAIN_PATTERN } from "../validate/fields.ts";
import { issuerProblem } from "../validate/access.ts";
import { REGION_FORM } from "../validate/region.ts";
import { isCidrOrAddress } from "../http/addresses.ts";
import { parseHostPort } from "../dns/resolver-address.ts";
import { LOG_FORMATS, type LogFormat } from "../log.ts";
import { UpdateError } from "../update/errors.ts";
import type { Http2Limits } from "../http2/limits.ts";
import type { PolicyLimits } from "../policy/limits.ts";
import { releaseSource } from "../update/source.ts";
import { isWebhookSecret } from "../core/events/signing.ts";
import { refusedAtOnce, urlProblem } from "../validate/webhook-url.ts";
import type { EventsConfig } from "../webhooks/settings.ts";

/** Flags whose value is a secret: a mistake in one is reported without echoing it. */
const SECRET_FLAGS: ReadonlySet<string> = new Set(["metrics-token", "database", "cluster-secret"]);

export interface ServerConfig {
  domain: string;
  httpPort: number;
  adminPort: number;
  /** Where agents connect directly (framed TCP, or TLS with --tls-cert); undefined: --agent-port off. */
  agentPort?: number;
  /** A port for tls tunnels only (--tls-port); undefined: off. */
  tlsPort?: number;
  /** The SSH gateway (--ssh-port); undefined: off. */
  ssh?: { port: number; handshakeTimeoutMs: number; maxHandshakesPerAddress: number };
  host: string;
  dataDir: string;
  /** A PostgreSQL URL (--database, BURROW_DATABASE_URL); undefined: SQLite in the data dir. */
  databaseUrl?: string;
  /** With PostgreSQL: this node among the others on the same database. */
  node?: {
    id: string;
    url?: string;
    secret?: string;
    /** --node-expiry: a node whose heartbeat is older is dead, its names free. */
    expiryMs: number;
    /** --relay-lookups: names looked up in live_tunnels at once; past it a visitor gets 503. */
    relayLookups: number;
  };
  /** --db-pool: connections to PostgreSQL at most. */
  databasePool: number;
  tcpPorts: { first: number; last: number };
  /** --dns-resolver; undefined: the system's resolvers. */
  dnsResolver?: { host: string; port: number };
  /** --udp-ports; undefined: off, no udp tunnels. */
  udpPorts?: { first: number; last: number };
  /** --udp-idle, in ms. */
  udpIdleMs: number;
  /** --udp-flows. */
  udpFlows: number;
  /** --udp-rate: datagrams a second per source (0: no cap). */
  udpRate: number;
  systemSubdomains: string[];
  tls?: { cert: string; key: string };
  /** How long the edge waits for a local service's response head. */
  responseTimeoutMs: number;
  /** The longest an agent may ask the edge to wait for its service (burrow http --response-timeout). */
  maxResponseTimeoutMs: number;
  /** How visitors reach the public port when a proxy in front changes scheme or port (--public-url). */
  publicUrl?: { scheme: "http" | "https"; port: number };
  /** Where the admin API listens; loopback unless told otherwise (it holds every secret). */
  adminHost: string;
  /** Seconds an idle keep-alive visitor connection stays open; requests in flight are never cut. */
  idleTimeoutS: number;
  /** --max-request-head: bytes a visitor's request head may take. */
  maxRequestHeadBytes: number;
  /** --max-read-ahead: bytes held of what a visitor sends past the request being served. */
  maxReadAheadBytes: number;
  /** --max-request-fields: header fields a visitor's request may carry. */
  maxRequestFields: number;
  /** --tls-hello-timeout: how long a TLS visitor has to send its ClientHello. */
  tlsHelloTimeoutMs: number;
  /** HTTP/2 for visitors: by ALPN on the HTTPS port (--h2), with prior knowledge on a plain one (--h2-prior-knowledge), and each connection's limits (--h2-max-*). */
  http2: Http2Settings;
  /** Concurrent visitor connections one client address may hold, per listener kind. */
  maxConnsPerIp: number;
  /** Concurrent agent connections one client address may hold. */
  maxAgentsPerIp: number;
  /** Concurrent visitor connections in all; undefined: derived from the open-file limit. */
  maxConns?: number;
  /** Proxies whose X-Forwarded-For names the real client (CIDRs, as given). */
  trustedProxies: string[];
  /**
   * Whether a tunnel's OIDC issuer may be plain http on this machine's
   * loopback (a provider beside the server, or a test). Off, every issuer is
   * https: an agent's token is all it takes to make the server fetch an
   * issuer's discovery, and loopback services are not the agents' to reach.
   */
  oidcHttpIssuers: boolean;
  /** Users' sign-in page and API on the domain itself (--portal). */
  portal: boolean;
  /** How long a device login's code waits for approval (--device-code-ttl). */
  deviceCodeTtlMs: number;
  /** --update-check: where to look for a newer release, and how often; undefined: off. */
  updateCheck?: { from?: string; intervalMs: number };
  /** The portal's company sign-in (--portal-oidc-*), when an issuer is given. */
  portalOidc?: PortalOidcConfig;
  /** Wrong basic-auth passwords one address may try on a tunnel before it is locked for a minute, doubling to 15. */
  basicAuthLimit: number;
  /** Traffic policies' caps (--policy-max-bytes, --policy-max-rules, --policy-cost-limit and the other --policy-*-max-* / --policy-max-* flags: every one of PolicyLimits) and rate-limit buckets kept (--policy-rate-limit-buckets). */
  policy: {
    limits: PolicyLimits;
    rateLimitBuckets: number;
    /** --policy-rate-limit-sync: how often a node tells the others its rate-limit counts. */
    rateLimitSyncMs: number;
    compileBudgetMs: number;
    /** Request bodies read for the actions that need them (--policy-body-limit, --policy-body-timeout, --policy-body-memory). */
    body: { maxBytes: number; timeoutMs: number; memoryBytes: number; responseMaxBytes: number; sseEventMaxBytes: number };
    /** jwt-validation's key sets (--policy-jwks-max-bytes, --policy-jwks-timeout, --policy-jwks-cache). */
    jwks: { maxBytes: number; timeoutMs: number; maxAgeMs: number };
    /** --policy-connect-max-bytes: what a tcp or tls visitor may send while its on_tcp_connect runs. */
    connectMaxBytes: number;
    /** The http-request action's requests (--policy-http-request-allow-private, -timeout, -max-bytes, -concurrency, -concurrency-per-tunnel, -max-per-run). */
    httpRequest: { allowPrivate: boolean; timeoutMs: number; maxBytes: number; concurrency: number; concurrencyPerTunnel: number; maxPerRun: number };
    /** --geoip-db: the MaxMind DB file that answers conn.geo.* (opened at start: edge/traffic-policy/geoip.ts); undefined: none. */
    geoipDb?: string;
    /** Tunnel policies kept compiled (--policy-compiled-kept). */
    compiledKept: number;
    /** How often another node's changes to the operator's policies are looked for, in ms (--policy-reload-interval). */
    reloadMs: number;
    /** How the GeoIP database is read: its decoded records kept (--geoip-cache), how often its file is looked at (--geoip-check-interval). */
    geoip: { cacheRecords: number; checkIntervalMs: number };
  };
  /** --region: this node's region, the policies' conn.server_region; the empty string: none. */
  region: string;
  /** Failed agent handshakes a client address may make a minute before RATE_LIMITED. */
  handshakeLimit: number;
  /** On SIGTERM, how long visitor requests in flight may take to finish. */
  drainTimeoutMs: number;
  /** Days the audit log keeps an entry; older ones are deleted at start and daily. */
  auditDays: number;
  /**
   * Certificates from an ACME CA (--acme-email, and no --tls-cert): the edge
   * serves HTTPS on httpsPort, and --http-port answers HTTP-01 and redirects.
   */
  acme?: AcmeConfig;
  /** --acme-email was given with --tls-cert: the files win, and the server says so. */
  acmeIgnored?: boolean;
  /** How log lines are written: `time level msg k=v` text, or one JSON object a line. */
  logFormat: LogFormat;
  /** The bearer token Prometheus scrapes GET /metrics with; undefined: only an admin session may read it. */
  metricsToken?: string;
  /** Webhooks, the outbox, the admission hook and alerts (--webhook-*, --events-queue, --admission-hook*, --alert-*). */
  events: EventsConfig;
}


export interface Http2Settings {
  alpn: boolean;
  priorKnowledge: boolean;
  limits: Http2Limits;
}

export interface AcmeConfig {
  email: string;
  directoryUrl: string;
  /** PEM file of a CA to trust for the directory's HTTPS (a test CA). */
  caRootFile?: string;
  httpsPort: number;
  /** UDP and TCP port of the DNS responder for the wildcard's DNS-01; undefined: --dns-port off. */
  dnsPort?: number;
  namesPerWeek: number;
  /** After a failure, the first wait before trying again (doubling up to an hour); also the least time between two issuances of one certificate. */
  retryMinMs: number;
  /** DNS answers a second to one client, and to all (bursts of twice that): no amplification worth having. */
  dnsRate: { perClient: number; total: number };
  /** How single names prove themselves: HTTP-01 on the plain HTTP port, or TLS-ALPN-01 on the HTTPS port. */
  challenge: "http-01" | "tls-alpn-01";
}

const port = (flag: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,5}$/, `--${flag} must be a port number from 0 to 65535`),
    v.transform(Number),
    v.maxValue(65535, `--${flag} must be a port number from 0 to 65535`),
  );

/** A whole number from `min` to `max`. */
const bounded = (flag: string, min: number, max: number) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,8}$/, `--${flag} must be a whole number from ${min} to ${max}`),
    v.transform(Number),
    v.minValue(min, `--${flag} must be a whole number from ${min} to ${max}`),
    v.maxValue(max, `--${flag} must be a whole number from ${min} to ${max}`),
  );

const count = (flag: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,7}$/, `--${flag} must be a positive whole number`),
    v.transform(Number),
    v.minValue(1, `--${flag} must be a positive whole number`),
  );

/** A user's limit: a whole number, 0 for none. */
const limit = (flag: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,16}$/, `--${flag} must be a whole number (0: no limit)`),
    v.transform(Number),
    v.maxValue(Number.MAX_SAFE_INTEGER, `--${flag} is too large`),
  );

/** A whole number from `min` to `max`, said as the flag's own words. */
const within = (flag: string, min: number, max: number, what: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,7}$/, `--${flag} must be ${what} from ${min} to ${max}`),
    v.transform(Number),
    v.minValue(min, `--${flag} must be ${what} from ${min} to ${max}`),
    v.maxValue(max, `--${flag} must be ${what} from ${min} to ${max}`),
  );

/** A range of ports, "A-B". */
const portRange = (flag: string) =>
  v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,5}-[0-9]{1,5}$/, `--${flag} must be a range such as 20000-29999`),
    v.transform((s) => {
      const [first, last] = s.split("-").map(Number) as [number, number];
      return { first, last };
    }),
    v.check((r) => r.first >= 1 && r.first <= r.last && r.last <= 65535, `--${flag} must be a range A-B with 1 <= A <= B <= 65535`),
  );

const DOMAIN = /^(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

const Schema = v.object({
  domain: v.pipe(v.string(), v.toLowerCase(), v.regex(DOMAIN, "--domain must be a DNS name such as tunnels.example.com")),
  "http-port": port("http-port"),
  "admin-port": port("admin-port"),
  "agent-port": v.union([v.literal("off"), port("agent-port")], "--agent-port must be a port number from 0 to 65535, or off"),
  "tls-port": v.union([v.literal("off"), port("tls-port")], "--tls-port must be a port number from 0 to 65535, or off"),
  "ssh-port": v.union([v.literal("off"), port("ssh-port")], "--ssh-port must be a port number from 0 to 65535, or off"),
  "ssh-handshake-timeout": within("ssh-handshake-timeout", 1, 600, "a whole number of seconds"),
  "ssh-max-handshakes": within("ssh-max-handshakes", 1, 100_000, "a whole number"),
  host: v.pipe(v.string(), v.minLength(1, "--host must not be empty")),
  "data-dir": v.pipe(v.string(), v.minLength(1, "--data-dir must not be empty")),
  "tcp-ports": portRange("tcp-ports"),
  "dns-resolver": v.string(),
  "udp-ports": v.union([v.literal("off"), portRange("udp-ports")], "--udp-ports must be a range A-B with 1 <= A <= B <= 65535, or off"),
  "udp-idle": within("udp-idle", 1, 86_400, "a whole number of seconds"),
  "udp-flows": within("udp-flows", 1, 1_000_000, "a whole number"),
  "udp-rate": within("udp-rate", 0, 10_000_000, "a whole number of datagrams a second (0: no cap)"),
  "system-subdomains": v.pipe(
    v.string(),
    v.transform((s) => s.split(",").map((x) => x.trim().toLowerCase()).filter((x) => x !== "")),
    v.check((list) => list.every((x) => SUBDOMAIN_PATTERN.test(x)), "--system-subdomains must be a comma-separated list of DNS labels"),
  ),
  "tls-cert": v.string(),
  "geoip-db": v.string(),
  "policy-compiled-kept": bounded("policy-compiled-kept", 1, 10_000),
  "policy-reload-interval": bounded("policy-reload-interval", 250, 5_000),
  "geoip-cache": bounded("geoip-cache", 100, 1_000_000),
  "geoip-check-interval": bounded("geoip-check-interval", 1, 86_400),
  "tls-key": v.string(),
  "response-timeout": v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,6}(\.[0-9]+)?$/, "--response-timeout must be a number of seconds"),
    v.transform(Number),
    v.minValue(0.1, "--response-timeout must be at least 0.1 seconds"),
  ),
  "public-url": v.string(),
  "admin-host": v.pipe(v.string(), v.minLength(1, "--admin-host must not be empty")),
  "idle-timeout": v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,3}$/, "--idle-timeout must be a whole number of seconds from 5 to 255"),
    v.transform(Number),
    v.minValue(5, "--idle-timeout must be a whole number of seconds from 5 to 255"),
    v.maxValue(255, "--idle-timeout must be a whole number of seconds from 5 to 255"),
  ),
  "max-request-head": bounded("max-request-head", 1024, 1_048_576),
  "max-request-fields": bounded("max-request-fields", 16, 10_000),
  "max-read-ahead": bounded("max-read-ahead", 4096, 1_048_576),
  "tls-hello-timeout": bounded("tls-hello-timeout", 1, 60),
  h2: v.picklist(["on", "off"], "--h2 must be on or off"),
  "h2-prior-knowledge": v.picklist(["on", "off"], "--h2-prior-knowledge must be on or off"),
  "h2-max-concurrent-streams": bounded("h2-max-concurrent-streams", 1, 1000),
  "h2-max-header-list": bounded("h2-max-header-list", 1024, 1_048_576),
  "h2-max-resets-per-second": bounded("h2-max-resets-per-second", 1, 100_000),
  "h2-max-control-frames": bounded("h2-max-control-frames", 10, 1_000_000),
  "h2-idle-timeout": bounded("h2-idle-timeout", 5, 255),
  "h2-max-queued-response": v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,10}$/, "--h2-max-queued-response must be a whole number of bytes from 65536 to 1073741824"),
    v.transform(Number),
    v.minValue(65536, "--h2-max-queued-response must be a whole number of bytes from 65536 to 1073741824"),
    v.maxValue(1_073_741_824, "--h2-max-queued-response must be a whole number of bytes from 65536 to 1073741824"),
  ),
  "max-conns-per-ip": count("max-conns-per-ip"),
  "max-conns": v.union([v.literal("auto"), count("max-conns")], "--max-conns must be a positive whole number, or auto"),
  "trusted-proxies": v.pipe(
    v.string(),
    v.transform((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")),
    v.check((list) => list.every(isCidrOrAddress), "--trusted-proxies must be a comma-separated list of addresses or CIDRs, e.g. 127.0.0.1,10.0.0.0/8"),
  ),
  "handshake-limit": count("handshake-limit"),
  "audit-days": count("audit-days"),
  "basic-auth-limit": count("basic-auth-limit"),
  "policy-max-bytes": bounded("policy-max-bytes", 1024, 16_777_216),
  "policy-max-rules": bounded("policy-max-rules", 1, 100_000),
  "policy-cost-limit": bounded("policy-cost-limit", 100, 10_000_000),
  "policy-max-expressions": bounded("policy-max-expressions", 1, 1000),
  "policy-max-actions": bounded("policy-max-actions", 1, 1000),
  "policy-expression-max-length": bounded("policy-expression-max-length", 64, 1_048_576),
  "policy-expression-max-depth": bounded("policy-expression-max-depth", 8, 256),
  "policy-expression-max-nodes": bounded("policy-expression-max-nodes", 10, 100_000),
  "policy-max-interpolations": bounded("policy-max-interpolations", 1, 1000),
  "policy-log-metadata-max-bytes": bounded("policy-log-metadata-max-bytes", 256, 1_048_576),
  "policy-log-metadata-max-depth": bounded("policy-log-metadata-max-depth", 1, 32),
  "policy-value-max-bytes": bounded("policy-value-max-bytes", 1024, 67_108_864),
  "policy-max-entries": bounded("policy-max-entries", 100, 10_000_000),
  "policy-json-max-depth": bounded("policy-json-max-depth", 1, 512),
  "policy-pattern-max-length": bounded("policy-pattern-max-length", 16, 65_536),
  "policy-pattern-max-steps": bounded("policy-pattern-max-steps", 1000, 10_000_000),
  "policy-jwks-max-bytes": bounded("policy-jwks-max-bytes", 1024, 16_777_216),
  "policy-connect-max-bytes": bounded("policy-connect-max-bytes", 1024, 16_777_216),
  "policy-http-request-allow-private": v.picklist(["on", "off"], "--policy-http-request-allow-private must be on or off"),
  "policy-http-request-timeout": bounded("policy-http-request-timeout", 1, 30),
  "policy-http-request-max-bytes": bounded("policy-http-request-max-bytes", 1024, 16_777_216),
  "policy-http-request-concurrency": bounded("policy-http-request-concurrency", 1, 10_000),
  "policy-http-request-concurrency-per-tunnel": bounded("policy-http-request-concurrency-per-tunnel", 1, 10_000),
  "policy-http-request-max-per-run": bounded("policy-http-request-max-per-run", 1, 64),
  "policy-jwks-timeout": bounded("policy-jwks-timeout", 1, 60),
  "policy-jwks-cache": bounded("policy-jwks-cache", 30, 86_400),
  "policy-rate-limit-buckets": bounded("policy-rate-limit-buckets", 1000, 10_000_000),
  "policy-rate-limit-sync": bounded("policy-rate-limit-sync", 50, 10_000),
  "policy-compile-budget": bounded("policy-compile-budget", 100, 600_000),
  "policy-body-limit": bounded("policy-body-limit", 1024, 67_108_864),
  "policy-body-timeout": bounded("policy-body-timeout", 1, 3600),
  "policy-response-body-limit": bounded("policy-response-body-limit", 1024, 67_108_864),
  "policy-sse-event-limit": bounded("policy-sse-event-limit", 1024, 16_777_216),
  "policy-body-memory": v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,11}$/, "--policy-body-memory must be a whole number of bytes from 1048576 to 17179869184"),
    v.transform(Number),
    v.minValue(1_048_576, "--policy-body-memory must be a whole number of bytes from 1048576 to 17179869184"),
    v.maxValue(17_179_869_184, "--policy-body-memory must be a whole number of bytes from 1048576 to 17179869184"),
  ),
  "max-agents-per-ip": count("max-agents-per-ip"),
  "drain-timeout": v.pipe(
    v.string(),
    v.regex(/^[0-9]{1,4}(\.[0-9]+)?$/, "--drain-timeout must be a number of seconds"),
    v.transform(Number),
  ),
  "https-port": port("https-port"),
  "acme-email": v.pipe(v.string(), v.check((s) => s === "" || /^[^\s@]+@[^\s@]+\.[^\s@]+$/.test(s), "--acme-email must be an email address")),
  "acme-directory": v.pipe(v.string(), v.check((s) => /^https?:\/\/\S+$/.test(s), "--acme-directory must be an http(s) URL")),
  "acme-ca-root": v.string(),
  "dns-port": v.union([v.literal("off"), port("dns-port")], "--dns-port must be a port number from 0 to 65535, or off"),
  "acme-names-per-week": count("acme-names-per-week"),
  "acme-retry-min": count("acme-retry-min"),
  "acme-challenge": v.picklist(["http-01", "tls-alpn-01"], "--acme-challenge must be http-01 or tls-alpn-01"),
  "dns-rate": count("dns-rate"),
  "dns-total-rate": count("dns-total-rate"),
  "max-response-timeout": count("max-response-timeout"),
  "log-format": v.picklist(LOG_FORMATS, `--log-format must be ${LOG_FORMATS.join(" or ")}`),
  "oidc-http-issuers": v.picklist(["off", "loopback"], "--oidc-http-issuers must be off or loopback"),
  portal: v.picklist(["on", "off"], "--portal must be on or off"),
  "portal-oidc-issuer": v.pipe(v.string(), v.check((s) => s === "" || issuerProblem(s) === undefined, "--portal-oidc-issuer must be an https URL (plain http only on loopback) without user, password, query or fragment")),
  "portal-oidc-client-id": v.pipe(v.string(), v.maxLength(512, "--portal-oidc-client-id is too long")),
  "portal-oidc-allow-domains": v.pipe(
    v.string(),
    v.transform((s) => s.split(",").map((x) => x.trim().toLowerCase().replace(/^@/, "")).filter((x) => x !== "")),
    v.check((list) => list.every((d) => /^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(d)), "--portal-oidc-allow-domains must be a comma-separated list of domains, e.g. example.com,example.org"),
  ),
  "portal-oidc-allow-groups": v.pipe(
    v.string(),
    v.transform((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")),
    v.check((list) => list.every((g) => g.length <= 256), "--portal-oidc-allow-groups: a group name is at most 256 characters"),
  ),
  "portal-oidc-invite-only": v.picklist(["on", "off"], "--portal-oidc-invite-only must be on or off"),
  "portal-default-max-tunnels": limit("portal-default-max-tunnels"),
  "portal-default-max-devices": limit("portal-default-max-devices"),
  "portal-default-traffic-limit": limit("portal-default-traffic-limit"),
  "portal-default-traffic-period": v.picklist(["daily", "monthly", "quarterly"], "--portal-default-traffic-period must be daily, monthly or quarterly"),
  "portal-default-protocols": v.pipe(
    v.string(),
    v.check((s) => v.safeParse(f.allowedProtocols, s).success, `--portal-default-protocols must be a comma-separated list of ${f.PROTOCOL_LIST}`),
  ),
  "device-code-ttl": within("device-code-ttl", 10, 3600, "a number of seconds"),
  "update-check": v.picklist(["on", "off"], "--update-check must be on or off"),
  "update-from": v.pipe(v.string(), v.maxLength(2048, "--update-from is too long")),
  "update-check-interval": within("update-check-interval", 1, 2592000, "a number of seconds"),
  // a scraper's secret: long enough not to be guessed, and plain enough to sit in a header and a config file
  database: v.pipe(
    v.string(),
    v.check((s) => s === "" || /^postgres(ql)?:\/\/[^\s]+$/.test(s), "--database must be a PostgreSQL URL, postgres://user:password@host:5432/database, or empty for SQLite in the data dir"),
  ),
  region: v.pipe(v.string(), v.check((s) => s === "" || REGION_FORM.test(s), "--region must be 1 to 63 lower-case letters, digits or dashes (e.g. eu, us-east-1)")),
  "node-id": v.pipe(
    v.string(),
    v.check((s) => s === "" || /^[a-z0-9][a-z0-9._-]{0,62}$/i.test(s), "--node-id must be 1 to 63 letters, digits, dots, dashes or underscores"),
  ),
  "node-url": v.pipe(v.string(), v.check((s) => s === "" || /^(http|ws)s?:\/\/[^\s/]+\/?$/.test(s), "--node-url must be http(s)://host:port, where the other nodes reach this one's public port")),
  "cluster-secret": v.pipe(
    v.string(),
    v.check((s) => s === "" || /^[\x21-\x7e]{16,512}$/.test(s), "--cluster-secret must be 16 to 512 visible ASCII characters without spaces (e.g. openssl rand -hex 32)"),
  ),
  // 4 at least: a handshake under its user's lock holds one while its rules borrow another
  "db-pool": within("db-pool", 4, 1000, "a number of connections"),
  // 3 heartbeats (one a second) at least, or a busy node would be taken for dead
  "node-expiry": within("node-expiry", 3, 3600, "a number of seconds"),
  "relay-lookups": within("relay-lookups", 1, 100000, "a number of lookups"),
  "webhook-allow-private": v.picklist(["on", "off"], "--webhook-allow-private must be on or off"),
  "webhook-timeout": bounded("webhook-timeout", 1, 120),
  "webhook-max-response": bounded("webhook-max-response", 1024, 16_777_216),
  "webhook-max-pending": bounded("webhook-max-pending", 10, 10_000_000),
  "webhook-retry-window": bounded("webhook-retry-window", 60, 2_592_000),
  "webhook-backoff-max": bounded("webhook-backoff-max", 1, 86_400),
  "webhook-concurrency": bounded("webhook-concurrency", 1, 1000),
  "webhook-history": bounded("webhook-history", 1, 3650),
  "webhooks-max": bounded("webhooks-max", 1, 100_000),
  "webhooks-per-user": bounded("webhooks-per-user", 0, 1000),
  "events-queue": bounded("events-queue", 100, 10_000_000),
  "admission-hook": v.pipe(v.string(), v.check((s) => s === "" || urlProblem(s) === undefined, "--admission-hook must be an http(s) URL without user, password or fragment")),
  "admission-hook-fail-open": v.picklist(["on", "off"], "--admission-hook-fail-open must be on or off"),
  "admission-hook-timeout": bounded("admission-hook-timeout", 1, 60),
  "alert-webhook": v.pipe(v.string(), v.check((s) => s === "" || urlProblem(s) === undefined, "--alert-webhook must be an http(s) URL without user, password or fragment")),
  "alert-outbox-pending": bounded("alert-outbox-pending", 1, 10_000_000),
  "metrics-token": v.pipe(
    v.string(),
    v.check((s) => s === "" || /^[\x21-\x7e]{16,512}$/.test(s), "--metrics-token must be 16 to 512 visible ASCII characters without spaces (e.g. openssl rand -hex 32)"),
  ),
});

/** --public-url: an http(s) URL whose host is the --domain; only its scheme and port are kept. */
function parsePublicUrl(raw: string, domain: string): ServerConfig["publicUrl"] {
  if (raw === "") return undefined;
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UsageError(`--public-url must be a URL such as https://${domain} (got '${raw}')`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") throw new UsageError(`--public-url must start with http:// or https:// (got '${raw}')`);
  if (url.hostname.toLowerCase() !== domain) throw new UsageError(`--public-url must name the --domain '${domain}' (got '${url.hostname}')`);
  if (url.pathname !== "/" || url.search !== "") throw new UsageError(`--public-url takes no path or query (got '${raw}')`);
  const scheme = url.protocol === "https:" ? "https" : "http";
  return { scheme, port: url.port ? Number(url.port) : scheme === "https" ? 443 : 80 };
}

/** The host name, as a node id: what tells one machine's node from another's by default. */
function defaultNodeId(): string {
  const host = hostname().toLowerCase().replace(/[^a-z0-9._-]/g, "-").replace(/^[^a-z0-9]+/, "");
  return host.slice(0, 63) || "node";
}

export interface PortalOidcConfig {
  issuer: string;
  clientId: string;
  clientSecret: string;
  allowDomains: string[];
  allowGroups: string[];
  inviteOnly: boolean;
  /** A user made by their first company sign-in gets these. */
  defaults: { maxTunnels: number; maxDevices: number; trafficLimit: number; trafficPeriod: "daily" | "monthly" | "quarterly"; allowedProtocols: string };
}

/** The portal's company sign-in from its flags and BURROW_PORTAL_OIDC_CLIENT_SECRET (never a flag: it would show in ps). */
/** --update-from, checked as burrow update checks --from: a URL or a directory; "" is the project's latest release. */
function updateFrom(from: string): string | undefined {
  if (from === "") return undefined;
  try {
    releaseSource(from);
  } catch (err) {
    if (err instanceof UpdateError) throw new UsageError(err.message.replace("--from", "--update-from"));
    throw err;
  }
  return from;
}

function portalOidc(o: Record<string, any>, env: Record<string, string | undefined>): PortalOidcConfig | undefined {
  const issuer = o["portal-oidc-issuer"] as string;
  if (issuer === "") {
    if (o["portal-oidc-client-id"]) throw new UsageError("--portal-oidc-client-id goes with --portal-oidc-issuer");
    return undefined;
  }
  if (o.portal !== "on") throw new UsageError("--portal-oidc-issuer needs the portal (--portal on)");
  if (!o["portal-oidc-client-id"]) throw new UsageError("--portal-oidc-issuer needs --portal-oidc-client-id");
  const clientSecret = env.BURROW_PORTAL_OIDC_CLIENT_SECRET ?? "";
  if (clientSecret === "") throw new UsageError("--portal-oidc-issuer needs the client secret in the environment: BURROW_PORTAL_OIDC_CLIENT_SECRET");
  if (new URL(issuer).protocol === "http:" && o["oidc-http-issuers"] !== "loopback") {
    throw new UsageError("--portal-oidc-issuer: a plain-http issuer needs --oidc-http-issuers loopback");
  }
  return {
    issuer: issuer.replace(/\/+$/, ""),
    clientId: o["portal-oidc-client-id"],
    clientSecret,
    allowDomains: o["portal-oidc-allow-domains"],
    allowGroups: o["portal-oidc-allow-groups"],
    inviteOnly: o["portal-oidc-invite-only"] === "on",
    defaults: {
      maxTunnels: o["portal-default-max-tunnels"],
      maxDevices: o["portal-default-max-devices"],
      trafficLimit: o["portal-default-traffic-limit"],
      trafficPeriod: o["portal-default-traffic-period"],
      allowedProtocols: o["portal-default-protocols"],
    },
  };
}

/** Webhooks' flags, and the hooks' secrets from the environment (never flags: they would show in ps). */
function eventsConfig(o: Record<string, any>, env: Record<string, string | undefined>): EventsConfig {
  const allowPrivate = o["webhook-allow-private"] === "on";
  // a hook on this machine or the private network without --webhook-allow-private would be refused at every call: said now
  for (const flag of ["admission-hook", "alert-webhook"] as const) {
    const refused = o[flag] ? refusedAtOnce(new URL(o[flag]), allowPrivate) : undefined;
    if (refused) throw new UsageError(`--${flag}: ${refused.replace("the server's --webhook-allow-private", "--webhook-allow-private on")}`);
  }
  let admissionHook: EventsConfig["admissionHook"];
  if (o["admission-hook"]) {
    const secret = env.BURROW_ADMISSION_HOOK_SECRET ?? "";
    if (!isWebhookSecret(secret)) throw new UsageError("--admission-hook needs its signing secret in the environment: BURROW_ADMISSION_HOOK_SECRET=whsec_<base64 of 24 to 64 random bytes> (e.g. whsec_$(openssl rand -base64 32))");
    admissionHook = { url: o["admission-hook"], secret, failOpen: o["admission-hook-fail-open"] === "on", timeoutMs: o["admission-hook-timeout"] * 1000 };
  } else if (o["admission-hook-fail-open"] === "on") throw new UsageError("--admission-hook-fail-open goes with --admission-hook");
  const alertSecret = env.BURROW_ALERT_WEBHOOK_SECRET;
  if (alertSecret !== undefined && alertSecret !== "" && !isWebhookSecret(alertSecret)) throw new UsageError("BURROW_ALERT_WEBHOOK_SECRET must be whsec_<base64 of 24 to 64 random bytes>");
  return {
    allowPrivate,
    timeoutMs: o["webhook-timeout"] * 1000,
    maxResponseBytes: o["webhook-max-response"],
    maxPending: o["webhook-max-pending"],
    retryWindowMs: o["webhook-retry-window"] * 1000,
    backoffMaxMs: o["webhook-backoff-max"] * 1000,
    concurrency: o["webhook-concurrency"],
    historyDays: o["webhook-history"],
    maxWebhooks: o["webhooks-max"],
    perUser: o["webhooks-per-user"],
    queueMax: o["events-queue"],
    admissionHook,
    alertWebhook: o["alert-webhook"] ? { url: o["alert-webhook"], secret: alertSecret || undefined } : undefined,
    alertOutboxPending: o["alert-outbox-pending"],
  };
}

/** Reads `burrow server` flags; throws UsageError with a one-line message. */
export function parseServerConfig(argv: string[], env: Record<string, string | undefined> = process.env) {
  const { values, positionals } = parseFlags(argv, SERVER_FLAGS, env);
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (values.help) return { help: true as const };
  if (values.database === undefined && env.BURROW_DATABASE_URL !== undefined) values.database = env.BURROW_DATABASE_URL;
  const merged = { ...SERVER_DEFAULTS, ...Object.fromEntries(Object.entries(values).filter(([, x]) => x !== undefined)) };
  const result = v.safeParse(Schema, merged);
  if (!result.success) {
    const issue = result.issues[0]!;
    const flag = issue.path?.[0]?.key;
    const got = flag === undefined || SECRET_FLAGS.has(String(flag)) ? "" : ` (got '${String(merged[flag as keyof typeof merged])}')`;
    throw new UsageError(issue.message.startsWith("--") ? issue.message + got : `--${String(flag)}: ${issue.message}`);
  }
  const o = result.output;
  if (Boolean(o["tls-cert"]) !== Boolean(o["tls-key"])) throw new UsageError("--tls-cert and --tls-key go together");
  for (const flag of ["node-id", "node-url", "cluster-secret", "db-pool", "node-expiry", "relay-lookups"] as const) {
    if (values[flag] !== undefined && values[flag] !== "" && !o.database) throw new UsageError(`--${flag} is for several nodes on one PostgreSQL database: it needs --database postgres://...`);
  }
  if (o["node-url"] && !o["cluster-secret"]) throw new UsageError("--node-url needs --cluster-secret: the nodes relay to each other only when they can tell each other apart from strangers");
  for (const flag of ["tls-cert", "tls-key", "acme-ca-root", "geoip-db"] as const) {
    if (o[flag] && !existsSync(o[flag])) throw new UsageError(`--${flag}: no such file '${o[flag]}'`);
  }
  const config: ServerConfig = {
    domain: o.domain,
    httpPort: o["http-port"],
    adminPort: o["admin-port"],
    agentPort: o["agent-port"] === "off" ? undefined : o["agent-port"],
    tlsPort: o["tls-port"] === "off" ? undefined : o["tls-port"],
    ssh: o["ssh-port"] === "off" ? undefined : { port: o["ssh-port"], handshakeTimeoutMs: o["ssh-handshake-timeout"] * 1000, maxHandshakesPerAddress: o["ssh-max-handshakes"] },
    host: o.host,
    dataDir: o["data-dir"],
    databaseUrl: o.database || undefined,
    node: o.database
      ? {
          id: o["node-id"] || defaultNodeId(),
          url: o["node-url"].replace(/\/$/, "") || undefined,
          secret: o["cluster-secret"] || undefined,
          expiryMs: o["node-expiry"] * 1000,
          relayLookups: o["relay-lookups"],
        }
      : undefined,
    databasePool: o["db-pool"],
    tcpPorts: o["tcp-ports"],
    udpPorts: o["udp-ports"] === "off" ? undefined : o["udp-ports"],
    dnsResolver: o["dns-resolver"] === "" ? undefined : parseHostPort(o["dns-resolver"], "--dns-resolver"),
    udpIdleMs: o["udp-idle"] * 1000,
    udpFlows: o["udp-flows"],
    udpRate: o["udp-rate"],
    systemSubdomains: o["system-subdomains"],
    tls: o["tls-cert"] ? { cert: o["tls-cert"], key: o["tls-key"] } : undefined,
    responseTimeoutMs: o["response-timeout"] * 1000,
    // never below the default: an agent may always ask for what everyone gets
    maxResponseTimeoutMs: Math.max(o["max-response-timeout"], o["response-timeout"]) * 1000,
    publicUrl: parsePublicUrl(o["public-url"], o.domain),
    adminHost: o["admin-host"],
    idleTimeoutS: o["idle-timeout"],
    maxRequestHeadBytes: o["max-request-head"],
    maxRequestFields: o["max-request-fields"],
    maxReadAheadBytes: o["max-read-ahead"],
    tlsHelloTimeoutMs: o["tls-hello-timeout"] * 1000,
    http2: {
      alpn: o.h2 === "on",
      priorKnowledge: o["h2-prior-knowledge"] === "on",
      limits: {
        maxConcurrentStreams: o["h2-max-concurrent-streams"],
        maxHeaderListBytes: o["h2-max-header-list"],
        maxResetsPerSecond: o["h2-max-resets-per-second"],
        maxControlFramesPerSecond: o["h2-max-control-frames"],
        idleTimeoutMs: o["h2-idle-timeout"] * 1000,
        maxQueuedResponseBytes: o["h2-max-queued-response"],
      },
    },
    auditDays: o["audit-days"],
    maxConnsPerIp: o["max-conns-per-ip"],
    maxConns: o["max-conns"] === "auto" ? undefined : o["max-conns"],
    maxAgentsPerIp: o["max-agents-per-ip"],
    trustedProxies: o["trusted-proxies"],
    oidcHttpIssuers: o["oidc-http-issuers"] === "loopback",
    portal: o.portal === "on",
    deviceCodeTtlMs: o["device-code-ttl"] * 1000,
    updateCheck: ((from) => (o["update-check"] === "on" ? { from, intervalMs: o["update-check-interval"] * 1000 } : undefined))(updateFrom(o["update-from"])),
    portalOidc: portalOidc(o, env),
    basicAuthLimit: o["basic-auth-limit"],
    policy: {
      limits: {
        maxDocumentBytes: o["policy-max-bytes"],
        maxRules: o["policy-max-rules"],
        costLimit: o["policy-cost-limit"],
        maxExpressionsPerRule: o["policy-max-expressions"],
        maxActionsPerRule: o["policy-max-actions"],
        maxExpressionLength: o["policy-expression-max-length"],
        maxExpressionDepth: o["policy-expression-max-depth"],
        maxExpressionNodes: o["policy-expression-max-nodes"],
        maxInterpolations: o["policy-max-interpolations"],
        maxLogMetadataBytes: o["policy-log-metadata-max-bytes"],
        maxLogMetadataDepth: o["policy-log-metadata-max-depth"],
        maxValueBytes: o["policy-value-max-bytes"],
        maxMadeEntries: o["policy-max-entries"],
        maxJsonDepth: o["policy-json-max-depth"],
        maxPatternLength: o["policy-pattern-max-length"],
        maxPatternSteps: o["policy-pattern-max-steps"],
      },
      rateLimitBuckets: o["policy-rate-limit-buckets"],
      rateLimitSyncMs: o["policy-rate-limit-sync"],
      compileBudgetMs: o["policy-compile-budget"],
      body: { maxBytes: o["policy-body-limit"], timeoutMs: o["policy-body-timeout"] * 1000, memoryBytes: o["policy-body-memory"], responseMaxBytes: o["policy-response-body-limit"], sseEventMaxBytes: o["policy-sse-event-limit"] },
      jwks: { maxBytes: o["policy-jwks-max-bytes"], timeoutMs: o["policy-jwks-timeout"] * 1000, maxAgeMs: o["policy-jwks-cache"] * 1000 },
      connectMaxBytes: o["policy-connect-max-bytes"],
      httpRequest: {
        allowPrivate: o["policy-http-request-allow-private"] === "on",
        timeoutMs: o["policy-http-request-timeout"] * 1000,
        maxBytes: o["policy-http-request-max-bytes"],
        concurrency: o["policy-http-request-concurrency"],
        // one tunnel's share is never more than the whole
        concurrencyPerTunnel: Math.min(o["policy-http-request-concurrency-per-tunnel"], o["policy-http-request-concurrency"]),
        maxPerRun: o["policy-http-request-max-per-run"],
      },
      geoipDb: o["geoip-db"] || undefined,
      compiledKept: o["policy-compiled-kept"],
      reloadMs: o["policy-reload-interval"],
      geoip: { cacheRecords: o["geoip-cache"], checkIntervalMs: o["geoip-check-interval"] * 1000 },
    },
    region: o.region,
    handshakeLimit: o["handshake-limit"],
    drainTimeoutMs: o["drain-timeout"] * 1000,
    logFormat: o["log-format"],
    metricsToken: o["metrics-token"] || undefined,
    events: eventsConfig(o, env),
    // certificate files win over ACME (the server logs that it does not use ACME then)
    acme:
      o["acme-email"] && !o["tls-cert"]
        ? {
            email: o["acme-email"],
            directoryUrl: o["acme-directory"],
            caRootFile: o["acme-ca-root"] || undefined,
            httpsPort: o["https-port"],
            dnsPort: o["dns-port"] === "off" ? undefined : o["dns-port"],
            namesPerWeek: o["acme-names-per-week"],
            retryMinMs: o["acme-retry-min"] * 1000,
            challenge: o["acme-challenge"],
            dnsRate: { perClient: o["dns-rate"], total: o["dns-total-rate"] },
          }
        : undefined,
  };
  if (o["acme-email"] && o["tls-cert"]) config.acmeIgnored = true;
  if (config.acme && config.acme.httpsPort === config.httpPort && config.httpPort !== 0) {
    throw new UsageError(`--https-port and --http-port must differ (both ${config.httpPort})`);
  }
  return { help: false as const, config };
}
