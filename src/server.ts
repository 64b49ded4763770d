/**
 * `burrow server`, wired: opens the database, makes the first admin if
 * needed, joins the other nodes, starts the housekeeping
 * (core/housekeeping.ts), the admin API (admin/serve.ts), the certificates
 * and the edge. stop() drains in-flight requests and closes the database
 * cleanly.
 */
import { join } from "node:path";
import { createAdminApp } from "./admin/app.ts";
import type { PublicInfo } from "./admin/public-info.ts";
import { serveAdmin } from "./admin/serve.ts";
import { AcmeCertificates, type AcmeSettings } from "./acme/server-certificates.ts";
import { configureAcmeHttp, readCaRoot } from "./acme/http-client.ts";
import { filesReport } from "./acme/report.ts";
import type { AcmeSharing } from "./acme/shared.ts";
import { BootstrapError, ensureAdmin } from "./core/bootstrap.ts";
import { startHousekeeping } from "./core/housekeeping.ts";
import { createCore, type Core } from "./core/index.ts";
import { txtLookup } from "./dns/resolver-address.ts";
import type { AcmeConfig, ServerConfig } from "./config/server.ts";
import { openServerDatabase } from "./db/server-database.ts";
import { Cluster } from "./cluster/cluster.ts";
import { edgeNodes } from "./cluster/edge-nodes.ts";
import { RateLimitSync } from "./cluster/rate-limit-sync.ts";
import { SyncedRateLimitStore } from "./policy/synced-rate-limit-store.ts";
import type { GeoLookup, RateLimitStore } from "./policy/index.ts";
import { createPortalApp } from "./portal/app.ts";
import type { SshGatewayFacts } from "./portal/ssh-keys.ts";
import { startEdge, type EdgeOptions, type RunningEdge } from "./edge/server.ts";
import { GeoipDatabase } from "./edge/traffic-policy/geoip.ts";
import type { ForwardOptionsReader } from "./ssh/forward-options.ts";
import { bareOptions } from "./ssh/forward-request.ts";
import { startSshGateway, type RunningSshGateway } from "./ssh/gateway.ts";
import { fileTls } from "./tls/tls-source.ts";
import { TrustedProxies } from "./http/addresses.ts";
import { shareSessions } from "./edge/access/oidc.ts";
import { log } from "./log.ts";
import { healthRoutes, Readiness } from "./admin/health.ts";
import { metricsRoutes } from "./admin/metrics.ts";
import { EdgeCounters } from "./metrics/edge-counters.ts";
import { createMetrics } from "./metrics/registry.ts";
import { startUpdateChecks } from "./update/check.ts";
import { BUILD, VERSION } from "./version.ts";
import { startWebhooks } from "./webhooks/service.ts";
import { admissionHook } from "./webhooks/admission-hook.ts";

/** At start, how long the server waits for the names it holds to be claimed over every node before it says it is ready. */
const HELD_NAMES_WAIT_MS = 5_000;

export interface RunningServer {
  adminUrl: string;
  edgePort: number;
  stop(): Promise<void>;
}

/** What the command line lends the server: how an SSH session's command is read as its forwards' options (its own flags). */
export interface ServerParts {
  forwardOptions?: ForwardOptionsReader;
}

export async function startServer(config: ServerConfig, env: Record<string, string | undefined>, parts: ServerParts = {}): Promise<RunningServer> {
  // first: a file that is not a GeoIP database is a usage error before anything is opened
  const geoip = config.policy.geoipDb !== undefined ? await GeoipDatabase.open(config.policy.geoipDb, config.policy.geoip) : undefined;
  const database = await openServerDatabase(config);
  const ev = config.events;
  const core = createCore({
    store: database.store,
    systemSubdomains: config.systemSubdomains,
    domain: config.domain,
    lookupTxt: txtLookup(config.dnsResolver),
    deviceCodeTtlMs: config.deviceCodeTtlMs,
    outbox: { retryWindowMs: ev.retryWindowMs, queueMax: ev.queueMax },
    webhookLimits: { maxWebhooks: ev.maxWebhooks, perUser: ev.perUser, retryWindowMs: ev.retryWindowMs, allowPrivate: ev.allowPrivate },
  });
  await ensureAdmin(core, env);
  // several nodes on one PostgreSQL database: this one joins before its edge takes an agent
  const cluster = database.postgres && config.node ? new Cluster({ client: database.postgres, nodeId: config.node.id, nodeUrl: config.node.url, expiryMs: config.node.expiryMs, poolSize: config.databasePool }, core) : undefined;
  await cluster?.start();
  // the traffic policies' rate limits count over every node
  const rateLimits = cluster && new RateLimitSync(database.postgres!, config.node!.id, new SyncedRateLimitStore(config.policy.rateLimitBuckets), config.policy.rateLimitSyncMs);
  await rateLimits?.start();
  if (config.node?.secret) shareSessions(config.node.secret);
  const stopHousekeeping = await startHousekeeping(core, config.auditDays);
  // one node on SQLite: its leases are "local"'s, taken back at once after a restart
  let certificates: AcmeCertificates | undefined;
  const webhooks = await startWebhooks(core, ev, config.node?.id ?? "local", () => certificates?.report().certificates ?? []);
  if (cluster) cluster.onNodeDown = (node, last) => webhooks.alerts.nodeDown(node, last);

  let publicSide: PublicInfo | undefined; // known once the edge listens
  let running: RunningEdge | undefined; // the edge, once it listens (the admin port answers before)
  const counters = new EdgeCounters();
  const metrics = createMetrics({
    edge: counters,
    live: () => running?.live(),
    logins: () => ({ failed: core.loginThrottle.failures, throttled: core.loginThrottle.refusals }),
    auditWriteFailures: () => core.audit.writeFailures,
    outbox: () => {
      const s = webhooks.worker.stats;
      return { events: core.events.stats, deliveries: { pending: s.pending, delivered: s.delivered, failedAttempts: s.failedAttempts, failed: s.failed, dropped: s.dropped }, latency: s.latency, attempt: s.attempt };
    },
  });
  const readiness = new Readiness({
    database: () => database.unwritable(),
    edge: () => (!running ? "not started yet" : running.listening().edge ? undefined : "the public port does not accept connections"),
    agents: () => (!running ? "not started yet" : running.listening().agents ? undefined : "the agents' port does not accept connections"),
  });
  const fileReport = config.tls && filesReport(config.tls.cert);
  const admin = createAdminApp(core, {
    publicInfo: () => publicSide,
    // the edge's own address is the portal's (the server's domain itself)
    portalOrigin: () => (config.portal ? publicSide?.edge_url : undefined),
    backup: database.backup,
    certificates: () => certificates?.report() ?? fileReport ?? { mode: "off", certificates: [] },
    operations: [...metricsRoutes(metrics, config.metricsToken), ...healthRoutes(readiness)],
    answered: metrics.adminRequest,
    policyLimits: config.policy.limits,
    policyGeoip: geoip !== undefined,
  });
  const { server: adminServer, url: adminUrl } = serveAdmin(admin, { host: config.adminHost, port: config.adminPort });
  if (config.acmeIgnored) log.info("certificate files given (--tls-cert): --acme-email is not used");
  let edge: RunningEdge | undefined;
  let ssh: RunningSshGateway | undefined;
  try {
    certificates = config.acme && (await startAcme(config, config.acme, cluster?.acme, (r) => webhooks.alerts.certificateResult(r)));
    edge = startEdge(edgeOptions(config, core, certificates, counters, cluster, () => ssh && { port: ssh.port, hostKeys: ssh.hostKeys }, rateLimits?.store, geoip));
    ssh = config.ssh && (await sshGateway(config, config.ssh, core, edge, parts.forwardOptions ?? bareOptions));
  } catch (err) {
    await edge?.stop();
    // a port already taken: let go of what did start, so the process exits with the error
    certificates?.stop();
    void adminServer.stop(true);
    stopHousekeeping();
    metrics.stop();
    await core.audit.stop();
    await webhooks.stop();
    await rateLimits?.stop();
    await cluster?.stop();
    geoip?.close();
    await database.close();
    throw err;
  }
  running = edge;
  // names held for the agents of the server before are claimed over every node before this one says it is ready
  await heldNamesClaimed(edge);
  publicSide = { domain: config.domain, edge_url: edge.publicUrl, tcp_host: config.domain };
  // logged last: tests and scripts take this line as "ready"
  log.info("admin api listening", {
    url: adminUrl,
    data: database.where,
    edge_port: edge.port,
    agent_port: edge.agentPort ?? "off",
    tls_port: edge.tlsPort ?? "off",
    ssh_port: ssh?.port ?? "off",
    ...(edge.redirectPort !== undefined ? { http_port: edge.redirectPort, dns_port: certificates?.dnsPort ?? "off" } : {}),
  });

  const updateChecks = config.updateCheck && startUpdateChecks({ ...config.updateCheck, version: VERSION, target: BUILD.target });

  let stopped: Promise<void> | undefined;
  return {
    adminUrl,
    edgePort: edge.port,
    stop() {
      stopped ??= (async () => {
        stopHousekeeping();
        updateChecks?.stop();
        // no new SSH client; the forwards of those there are the edge's agents, drained with the others
        ssh?.pause();
        await Promise.all([adminServer.stop(false), edge.stop()]); // admin: in-flight requests finish
        await ssh?.stop();
        metrics.stop();
        certificates?.stop();
        await core.audit.stop(); // the refusals counted since the last flush
        await webhooks.stop(); // the edge's queued events written, the attempts under way ended
        await rateLimits?.stop(); // its last counts told
        await cluster?.stop(); // its names free at once for the other nodes
        await database.close(); // after the edge's last traffic flush
        geoip?.close();
        log.info("server stopped");
      })();
      return stopped;
    },
  };
}

/** The SSH gateway on the edge's agents' side; its host keys' fingerprints logged for users to check. */
async function sshGateway(config: ServerConfig, ssh: NonNullable<ServerConfig["ssh"]>, core: Core, edge: RunningEdge, forwardOptions: ForwardOptionsReader): Promise<RunningSshGateway> {
  const { context, admit, release, joined, left } = edge.agentSide;
  let gateway: RunningSshGateway;
  try {
    gateway = await startSshGateway({ host: config.host, port: ssh.port, dataDir: config.dataDir, handshakeTimeoutMs: ssh.handshakeTimeoutMs, maxHandshakesPerAddress: ssh.maxHandshakesPerAddress, core, edge: context, guard: context.handshakes, admit, release, sessions: { joined, left }, forwardOptions });
  } catch (err) {
    const code = (err as { code?: string }).code;
    throw Object.assign(new Error(`--ssh-port ${ssh.port}: ${(err as Error).message}`), { code });
  }
  log.info("ssh gateway listening", { port: gateway.port, ...Object.fromEntries(gateway.hostKeys.map((k) => [`fingerprint_${k.label.toLowerCase()}`, k.fingerprint])) });
  return gateway;
}

/** Waits, bounded, for the held names' claims: a database that does not answer is logged by the claims and must not hold the start. */
async function heldNamesClaimed(edge: RunningEdge): Promise<void> {
  let waited: ReturnType<typeof setTimeout> | undefined;
  await Promise.race([edge.namesHeld, new Promise((done) => (waited = setTimeout(done, HELD_NAMES_WAIT_MS)))]);
  clearTimeout(waited); // a pending timer would keep the process alive after a stop
}

/** The edge's options from the server's settings, with the parts the server plugs in. */
function edgeOptions(
  config: ServerConfig,
  core: Core,
  certificates: AcmeCertificates | undefined,
  counters: EdgeCounters,
  cluster: Cluster | undefined,
  sshFacts: () => SshGatewayFacts | undefined,
  rateLimits: RateLimitStore | undefined,
  geoip: GeoLookup | undefined,
): EdgeOptions {
  return {
    core,
    domain: config.domain,
    region: config.region,
    host: config.host,
    // with ACME the edge is HTTPS on --https-port, and --http-port answers validations and redirects
    port: config.acme ? config.acme.httpsPort : config.httpPort,
    tcpPorts: config.tcpPorts,
    udpPorts: config.udpPorts,
    udpIdleMs: config.udpIdleMs,
    udpFlows: config.udpFlows,
    udpRate: config.udpRate,
    tls: certificates ?? (config.tls ? fileTls(config.tls.cert, config.tls.key) : undefined),
    redirect: certificates && { port: config.httpPort, challenge: (path) => certificates.answerChallenge(path) },
    wantCertificate: certificates && ((host) => certificates.want(host)),
    tlsAlpnChallenge: certificates && config.acme?.challenge === "tls-alpn-01" ? (hello) => certificates.answerTlsAlpn(hello) : undefined,
    responseTimeoutMs: config.responseTimeoutMs,
    maxResponseTimeoutMs: config.maxResponseTimeoutMs,
    oidcHttpIssuers: config.oidcHttpIssuers,
    basicAuthLimit: config.basicAuthLimit,
    policy: { ...config.policy, rateLimits, geoip },
    publicUrl: config.publicUrl,
    agentPort: config.agentPort,
    tlsPort: config.tlsPort,
    idleTimeoutS: config.idleTimeoutS,
    maxRequestHeadBytes: config.maxRequestHeadBytes,
    maxRequestFields: config.maxRequestFields,
    maxReadAheadBytes: config.maxReadAheadBytes,
    tlsHelloTimeoutMs: config.tlsHelloTimeoutMs,
    http2: config.http2,
    maxConnsPerIp: config.maxConnsPerIp,
    maxConns: config.maxConns,
    maxAgentsPerIp: config.maxAgentsPerIp,
    trustedProxies: new TrustedProxies(config.trustedProxies),
    handshakeLimit: config.handshakeLimit,
    drainTimeoutMs: config.drainTimeoutMs,
    holdsFile: join(config.dataDir, "restart-holds.json"),
    nodeName: config.node?.id ?? "local",
    admissionHook: config.events.admissionHook && admissionHook({ ...config.events.admissionHook, allowPrivate: config.events.allowPrivate, maxResponseBytes: config.events.maxResponseBytes }),
    counters,
    nodes: cluster && edgeNodes(cluster, { secret: config.node?.secret, relayLookups: config.node?.relayLookups }),
    apex: config.portal ? (facts) => createPortalApp(core, { domain: config.domain, oidc: config.portalOidc, ...facts, ssh: sshFacts }) : undefined,
  };
}

/** ACME's client settings, then the certificates it holds and the DNS responder for the wildcard. */
async function startAcme(config: ServerConfig, acme: AcmeConfig, sharing: AcmeSharing | undefined, onResult: AcmeSettings["onResult"]): Promise<AcmeCertificates> {
  if (acme.caRootFile) {
    const root = readCaRoot(acme.caRootFile);
    if (!root.ok) throw new BootstrapError(`--acme-ca-root: ${root.error.message}`);
    configureAcmeHttp({ caRootPem: root.value });
  }
  return AcmeCertificates.start({
    dataDir: config.dataDir,
    domain: config.domain,
    email: acme.email,
    directoryUrl: acme.directoryUrl,
    dns:
      acme.dnsPort === undefined
        ? undefined
        : { host: config.host, port: acme.dnsPort, perClientPerSecond: acme.dnsRate.perClient, totalPerSecond: acme.dnsRate.total },
    onDemandPerWeek: acme.namesPerWeek,
    retryMinMs: acme.retryMinMs,
    challenge: acme.challenge,
    sharing,
    onResult,
  });
}
