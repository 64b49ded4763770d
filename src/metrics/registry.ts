/**
 * Every metric burrow exports on GET /metrics, in one prom-client registry.
 * Most are read from their sources when Prometheus scrapes (the edge's
 * counters, what is live, the login throttle, the process), so nothing on
 * the edge's hot paths touches prom-client; the admin API's requests are
 * counted here directly, one increment per request.
 *
 * Labels take values from closed lists only (a protocol, a status class, a
 * route's pattern, a code): never a subdomain, path or address, which would
 * make a series per visitor.
 */
import { Counter, Gauge, Registry, type Metric } from "prom-client";
import { VERSION } from "../version.ts";
import { KIND_NAMES, KINDS, type TunnelKind } from "../protocol/kinds.ts";
import { Buckets } from "./buckets.ts";
import { REQUEST_KINDS, STATUS_CLASSES, type EdgeCounters } from "./edge-counters.ts";
import { UDP_DROPS } from "./udp-counters.ts";
import { processMetrics } from "./process.ts";

export const PREFIX = "burrow_";

/** What is live now, read at each scrape; undefined until the edge is up. */
export interface LiveNumbers {
  agents: { websocket: number; direct: number };
  tunnels: Record<TunnelKind, number>;
  /** Open visitor connections on the public HTTP port and on TCP tunnels' ports. */
  visitorConnections: { http: number; tcp: number };
  /** Bytes through tunnels since start: in is toward the local services, out back to visitors. */
  bytes: { in: number; out: number };
}

export interface MetricsSources {
  edge: EdgeCounters;
  live(): LiveNumbers | undefined;
  /** Admin logins refused for a wrong username or password, and refused unread while throttled. */
  logins(): { failed: number; throttled: number };
  /** Audit log entries (or their counts) the database did not take, since start. */
  auditWriteFailures(): number;
  /** The outbox and its delivery worker (webhooks/worker.ts); undefined: not running. */
  outbox?(): OutboxNumbers | undefined;
}

export interface OutboxNumbers {
  /** Events written (with a webhook that wanted them), edge events queued now, dropped from the queue, lost to failed writes. */
  events: { written: number; queued: number; queueDropped: number; writeFailures: number };
  /** Deliveries waiting over every webhook; delivered; attempts that failed; given up; dropped by the cap. */
  deliveries: { pending: number; delivered: number; failedAttempts: number; failed: number; dropped: number };
  latency: Buckets;
  attempt: Buckets;
}

export interface ServerMetrics {
  /** The exposition, in the Prometheus text format. */
  render(): Promise<string>;
  contentType: string;
  /** One admin API request answered: its route's pattern (or "unmatched"), method and status. */
  adminRequest(route: string, method: string, status: number): void;
  stop(): void;
}

const METHODS: ReadonlySet<string> = new Set(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]);

export function createMetrics(sources: MetricsSources): ServerMetrics {
  const registry = new Registry();
  const registers = [registry];
  const { edge } = sources;
  const name = (n: string) => PREFIX + n;

  /** A counter whose values are read from a source at scrape time. */
  function readCounter<L extends string>(n: string, help: string, labelNames: L[], read: () => [Partial<Record<L, string>>, number][]) {
    new Counter<L>({
      name: name(n),
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const [labels, value] of read()) this.inc(labels, value);
      },
    });
  }
  function readGauge<L extends string>(n: string, help: string, labelNames: L[], read: () => [Partial<Record<L, string>>, number][]) {
    new Gauge<L>({
      name: name(n),
      help,
      labelNames,
      registers,
      collect() {
        this.reset();
        for (const [labels, value] of read()) this.set(labels, value);
      },
    });
  }

  new Gauge({ name: name("build_info"), help: "Always 1; the version of burrow running.", labelNames: ["version"], registers }).set({ version: VERSION }, 1);

  readGauge("agents_connected", "Agents connected now (handshake done), by transport: websocket, or direct (the --agent-port).", ["transport"], () => {
    const live = sources.live();
    return [
      [{ transport: "websocket" }, live?.agents.websocket ?? 0],
      [{ transport: "direct" }, live?.agents.direct ?? 0],
    ];
  });
  readGauge("tunnels_active", "Tunnels with a connected agent now, by protocol (http, tcp, tls, udp).", ["protocol"], () => {
    const live = sources.live();
    return KIND_NAMES.map((k) => [{ protocol: KINDS[k].metricsLabel }, live?.tunnels[k] ?? 0]);
  });
  readGauge("visitor_connections_open", "Visitor connections open now, by listener: the public HTTP port, or TCP tunnels' ports (with TLS tunnels' connections).", ["listener"], () => {
    const live = sources.live();
    return [
      [{ listener: "http" }, live?.visitorConnections.http ?? 0],
      [{ listener: "tcp" }, live?.visitorConnections.tcp ?? 0],
    ];
  });
  readCounter("agent_handshakes_total", "Agent handshakes by result: READY, MOVE (sent on to the direct port), or the refusal's code (AUTH_FAILED, RATE_LIMITED, ...).", ["result"], () =>
    [...edge.handshakes].map(([result, n]) => [{ result }, n]),
  );
  readCounter("visitor_requests_total", "Visitor requests on the public port, by protocol (http, websocket upgrade, h2 stream) and status class (2xx, ...).", ["protocol", "status"], () => {
    const out: [{ protocol: string; status: string }, number][] = [];
    REQUEST_KINDS.forEach((protocol, k) =>
      STATUS_CLASSES.forEach((status, c) => {
        const n = edge.requests[k * STATUS_CLASSES.length + c]!;
        // the five classes always (a dashboard's zero), "other" (a status outside 100-599) once it happens
        if (c > 0 || n > 0) out.push([{ protocol, status }, n]);
      }),
    );
    return out;
  });
  registerBuckets(registry, name("visitor_request_duration_seconds"), "Seconds from a visitor request's arrival to its response head (or WebSocket upgrade).", edge.requestDuration);
  readCounter("tunnel_bytes_total", "Bytes through tunnels: in is from visitors toward local services, out is back.", ["direction"], () => {
    const bytes = sources.live()?.bytes;
    return [
      [{ direction: "in" }, bytes?.in ?? 0],
      [{ direction: "out" }, bytes?.out ?? 0],
    ];
  });
  readCounter("tcp_connections_opened_total", "Connections to TCP tunnels' ports, and TLS tunnels' connections, that were relayed to an agent.", [], () => [[{}, edge.tcpConnections]]);
  readCounter("udp_datagrams_total", "Datagrams through udp tunnels: in is from visitors toward local services, out is the services' replies back.", ["direction"], () => [
    [{ direction: "in" }, edge.udp.datagramsIn],
    [{ direction: "out" }, edge.udp.datagramsOut],
  ]);
  readCounter(
    "udp_datagrams_dropped_total",
    "Datagrams udp tunnels dropped, by why: rules (the tunnel's IP rules), rate (over --udp-rate for its source), no_agent (none connected to take it), congested (the agent's link), unsent (the reply could not be sent).",
    ["reason"],
    () => UDP_DROPS.map((reason, i) => [{ reason }, edge.udp.dropped[i]!]),
  );
  readGauge("udp_flows_open", "udp tunnels' flows open now (one per visitor address and port).", [], () => [[{}, edge.udp.flowsOpen]]);
  readCounter("udp_flows_opened_total", "udp tunnels' flows opened since start.", [], () => [[{}, edge.udp.flowsOpened]]);
  readCounter("streams_reset_total", "Streams ended by a reset, by who ended them (edge, agent, session: the connection closed under them) and code.", ["by", "code"], () =>
    [...edge.resets].map(([key, n]) => {
      const [by, code] = key.split(" ") as [string, string];
      return [{ by, code }, n];
    }),
  );
  readCounter("admin_login_failures_total", "Admin logins refused for a wrong username or password.", [], () => [[{}, sources.logins().failed]]);
  readCounter("admin_logins_throttled_total", "Admin logins refused unread because the address or username was throttled (429).", [], () => [[{}, sources.logins().throttled]]);
  readCounter("audit_write_failures_total", "Audit log writes (an entry, or a flush of repeated events' counts) the database did not take.", [], () => [[{}, sources.auditWriteFailures()]]);
  const outbox = () => sources.outbox?.();
  readGauge("webhook_deliveries_pending", "Webhook deliveries waiting in the outbox now, over every webhook (read every few seconds).", [], () => [[{}, outbox()?.deliveries.pending ?? 0]]);
  readCounter(
    "webhook_deliveries_total",
    "Webhook deliveries by how they ended on this node: delivered (a 2xx), failed (given up after the retry window), dropped (over --webhook-max-pending).",
    ["result"],
    () => {
      const d = outbox()?.deliveries;
      return [
        [{ result: "delivered" }, d?.delivered ?? 0],
        [{ result: "failed" }, d?.failed ?? 0],
        [{ result: "dropped" }, d?.dropped ?? 0],
      ];
    },
  );
  readCounter("webhook_attempts_failed_total", "Webhook delivery attempts that failed (each is tried again until the retry window ends).", [], () => [[{}, outbox()?.deliveries.failedAttempts ?? 0]]);
  registerBuckets(registry, name("webhook_delivery_latency_seconds"), "Seconds from an event to its delivery (a 2xx).", () => outbox()?.latency);
  registerBuckets(registry, name("webhook_attempt_duration_seconds"), "Seconds one webhook delivery attempt took, whatever its end.", () => outbox()?.attempt);
  readCounter("events_written_total", "Events written to the outbox (those some webhook wanted).", [], () => [[{}, outbox()?.events.written ?? 0]]);
  readGauge("events_queued", "Edge events (tunnels online and offline, refusals, rate limits) queued to be written now.", [], () => [[{}, outbox()?.events.queued ?? 0]]);
  readCounter("events_queue_dropped_total", "Edge events dropped because the queue was full (--events-queue) or the database stayed unavailable.", [], () => [[{}, outbox()?.events.queueDropped ?? 0]]);
  readCounter("events_write_failures_total", "Events lost to a write the database refused (not for being unavailable).", [], () => [[{}, outbox()?.events.writeFailures ?? 0]]);
  registerBuckets(registry, name("traffic_flush_duration_seconds"), "Seconds one flush of the traffic counters into the database took.", edge.flushDuration);
  readCounter("traffic_flush_rows_total", "Rows the traffic flushes upserted (one per user and day with traffic).", [], () => [[{}, edge.flushRows]]);
  readCounter("traffic_flush_errors_total", "Rows a traffic flush failed to write.", [], () => [[{}, edge.flushErrors]]);

  const adminRequests = new Counter({
    name: name("admin_requests_total"),
    help: "Admin API requests by route pattern (e.g. /api/users/:id; unmatched for no route), method and status.",
    labelNames: ["route", "method", "status"],
    registers,
  });

  const processGauges = processMetrics(registry, PREFIX);

  return {
    render: () => registry.metrics(),
    contentType: registry.contentType,
    adminRequest(route, method, status) {
      adminRequests.inc({ route, method: METHODS.has(method) ? method : "other", status: String(status) });
    },
    stop: () => processGauges.stop(),
  };
}

/**
 * A Buckets histogram in the registry, rendered as Prometheus's cumulative
 * buckets with _sum and _count. prom-client's own Histogram allocates on
 * every observe(), which the edge's hot path does not take; this renders
 * the edge's plain numbers in the shape prom-client's get() returns.
 */
function registerBuckets(registry: Registry, metricName: string, help: string, source: Buckets | (() => Buckets | undefined)): void {
  const empty = new Buckets(source instanceof Buckets ? source.bounds : []);
  const metric = {
    name: metricName,
    help,
    type: "histogram",
    aggregator: "sum",
    async get() {
      const buckets = (source instanceof Buckets ? source : source()) ?? empty;
      const values: { labels: Record<string, string | number>; value: number; metricName: string }[] = [];
      let cumulative = 0;
      buckets.bounds.forEach((bound, i) => {
        cumulative += buckets.counts[i]!;
        values.push({ labels: { le: bound }, value: cumulative, metricName: `${metricName}_bucket` });
      });
      values.push({ labels: { le: "+Inf" }, value: buckets.count, metricName: `${metricName}_bucket` });
      values.push({ labels: {}, value: buckets.sum, metricName: `${metricName}_sum` });
      values.push({ labels: {}, value: buckets.count, metricName: `${metricName}_count` });
      return { name: metricName, help, type: "histogram", values, aggregator: "sum" };
    },
    reset() {},
  };
  // the registry takes any object with get(); its type names only prom-client's own classes
  registry.registerMetric(metric as unknown as Metric);
}
