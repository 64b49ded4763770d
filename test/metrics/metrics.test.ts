/**
 * GET /metrics on a real server, with a real agent and real sockets: who may
 * read it, and that each counter moves by what really happened (N requests
 * through a tunnel: +N, histogram count +N, bytes grow; a refused handshake,
 * a TCP connection, a visitor leaving early, admin requests and logins).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { parseExposition, sample, scrape, type Exposition } from "../harness/metrics.ts";
import { echoThrough, freeRange } from "../harness/ports.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const METRICS_TOKEN = "scrape-me-0123456789abcdef";
const bearer = { Authorization: `Bearer ${METRICS_TOKEN}` };
const SUBDOMAIN = "metricsdemo";
const BODY = "x".repeat(1000);

let server: TestServer;
let api: AdminClient;
let token: string;
/** Requests to /hang wait here until the test lets them go. */
const hanging: (() => void)[] = [];
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    if (new URL(req.url).pathname === "/hang") await new Promise<void>((resolve) => hanging.push(resolve));
    return new Response(BODY);
  },
});
/** The echo service echoThrough expects: "ready\n", then every byte back. */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  const tcp = freeRange(4);
  server = await startServer({ args: ["--metrics-token", METRICS_TOKEN, "--tcp-ports", `${tcp.first}-${tcp.last}`] });
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("metrics-user"));
});

afterAll(async () => {
  for (const release of hanging.splice(0)) release();
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
});

const metrics = () => scrape(server.adminUrl, bearer);
const delta = (before: Exposition, after: Exposition, series: string) => sample(after, series) - sample(before, series);

/** Scrapes until `ok` holds (counters read at scrape time can trail an event by a turn of the server's loop). */
async function until(ok: (e: Exposition) => boolean, timeoutMs = 5_000): Promise<Exposition> {
  const deadline = Date.now() + timeoutMs;
  let last = await metrics();
  while (!ok(last) && Date.now() < deadline) {
    await Bun.sleep(50);
    last = await metrics();
  }
  return last;
}

describe("who may read /metrics", () => {
  test("the metrics token as a bearer token: 200 in the Prometheus text format", async () => {
    const res = await fetch(`${server.adminUrl}/metrics`, { headers: bearer });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toStartWith("text/plain; version=0.0.4");
    expect(res.headers.get("cache-control")).toBe("no-store");
    const body = await res.text();
    expect(body).toContain("# TYPE burrow_visitor_requests_total counter");
    expect(() => parseExposition(body)).not.toThrow();
  });

  test("a signed-in admin's session cookie: 200", async () => {
    const res = await api.get("/metrics");
    expect(res.status).toBe(200);
    expect(String(res.body)).toContain("burrow_process_resident_memory_bytes");
  });

  test("no credentials, a wrong token, another scheme or a signed-out cookie: 401 with a Bearer challenge", async () => {
    const signedOut = await signedIn(server);
    await signedOut.post("/api/auth/logout");
    const attempts: Record<string, string>[] = [
      {},
      { Authorization: `Bearer ${METRICS_TOKEN}x` },
      { Authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}` },
      { Authorization: `Basic ${btoa(`admin:${METRICS_TOKEN}`)}` },
      { Authorization: METRICS_TOKEN },
      { Cookie: "tunnel_admin_session=not-a-session" },
    ];
    for (const headers of attempts) {
      const res = await fetch(`${server.adminUrl}/metrics`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toStartWith("Bearer");
      expect(await res.text()).not.toContain("burrow_");
    }
    expect((await signedOut.get("/metrics")).status).toBe(401);
  });
});

describe("counters move with real traffic", () => {
  test("N requests through a real agent: requests +N in 2xx, histogram count +N, bytes grow; no subdomain, path or address in any label", async () => {
    await using agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server.edgeUrl, token, args: ["--subdomain", SUBDOMAIN] });
    const live = await until((e) => sample(e, 'burrow_tunnels_active{protocol="http"}') === 1);
    // the agent moved to the direct port: one agent there, none on a WebSocket
    expect(sample(live, 'burrow_agents_connected{transport="direct"}')).toBe(1);
    expect(sample(live, 'burrow_agents_connected{transport="websocket"}')).toBe(0);

    const before = await metrics();
    const N = 7;
    for (let i = 0; i < N; i++) {
      const res = await tunnelFetch(server.edgePort, SUBDOMAIN, `/only-in-this-test/${i}`);
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(BODY);
    }
    // two requests for a name with no tunnel: 4xx, answered by the edge itself
    for (let i = 0; i < 2; i++) expect((await tunnelFetch(server.edgePort, "no-such-tunnel", "/")).status).toBe(404);
    const after = await metrics();

    expect(delta(before, after, 'burrow_visitor_requests_total{protocol="http",status="2xx"}')).toBe(N);
    expect(delta(before, after, 'burrow_visitor_requests_total{protocol="http",status="4xx"}')).toBe(2);
    expect(delta(before, after, 'burrow_visitor_requests_total{protocol="http",status="5xx"}')).toBe(0);
    expect(delta(before, after, "burrow_visitor_request_duration_seconds_count")).toBe(N + 2);
    expect(delta(before, after, 'burrow_visitor_request_duration_seconds_bucket{le="+Inf"}')).toBe(N + 2);
    expect(delta(before, after, "burrow_visitor_request_duration_seconds_sum")).toBeGreaterThan(0);
    // each response carried the body out, each request its head in
    expect(delta(before, after, 'burrow_tunnel_bytes_total{direction="out"}')).toBeGreaterThanOrEqual(N * BODY.length);
    expect(delta(before, after, 'burrow_tunnel_bytes_total{direction="in"}')).toBeGreaterThan(N * 20);

    for (const secretish of [SUBDOMAIN, "only-in-this-test", "no-such-tunnel", "127.0.0.1", "metrics-user"]) expect(after.text).not.toContain(secretish);
    // its handshake: it asked where the direct port is and said HELLO there (no WebSocket, no MOVE), READY
    expect(sample(after, 'burrow_agent_handshakes_total{result="MOVE"}')).toBe(0);
    expect(sample(after, 'burrow_agent_handshakes_total{result="READY"}')).toBeGreaterThanOrEqual(1);
    expect(sample(after, 'burrow_agents_connected{transport="direct"}')).toBeGreaterThanOrEqual(1);
    // the traffic is written down within a flush interval (2 s)
    const flushed = await until((e) => sample(e, "burrow_traffic_flush_rows_total") > 0);
    expect(sample(flushed, "burrow_traffic_flush_duration_seconds_count")).toBeGreaterThan(0);

    await agent.stop();
    await until((e) => sample(e, 'burrow_agents_connected{transport="direct"}') === 0);
  });

  test("a handshake with a wrong token counts AUTH_FAILED once; a good one READY once", async () => {
    const before = await metrics();
    const refused = await sayHello({ port: server.edgePort, via: "websocket", token: "brw_" + "q".repeat(43) });
    expect(refused.refusal?.code).toBe("AUTH_FAILED");
    const ready = await sayHello({ port: server.agentPort!, via: "direct", token });
    expect(ready.type).toBe("READY");
    const after = await until((e) => delta(before, e, 'burrow_agent_handshakes_total{result="READY"}') >= 1);
    expect(delta(before, after, 'burrow_agent_handshakes_total{result="AUTH_FAILED"}')).toBe(1);
    expect(delta(before, after, 'burrow_agent_handshakes_total{result="READY"}')).toBe(1);
  });

  test("connections to a TCP tunnel count once each", async () => {
    await using agent = await startAgent({ kind: "tcp", target: `127.0.0.1:${echo.port}`, server: server.edgeUrl, token });
    await until((e) => sample(e, 'burrow_tunnels_active{protocol="tcp"}') === 1);
    const before = await metrics();
    for (let i = 0; i < 3; i++) expect(await echoThrough(agent.port!, `ping ${i}`)).toBe(`ping ${i}`);
    const after = await metrics();
    expect(delta(before, after, "burrow_tcp_connections_opened_total")).toBe(3);
    expect(delta(before, after, 'burrow_tunnel_bytes_total{direction="in"}')).toBeGreaterThanOrEqual("ping 0".length * 3);
  });

  test("a visitor that leaves before the answer: the edge resets its stream (CANCELLED)", async () => {
    await using agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server.edgeUrl, token, args: ["--subdomain", "hangs"] });
    const before = await metrics();
    const leaving = new AbortController();
    const request = tunnelFetch(server.edgePort, "hangs", "/hang", { signal: leaving.signal }).catch(() => "left");
    // the request is at the local service once it waits there
    for (let i = 0; i < 100 && hanging.length === 0; i++) await Bun.sleep(20);
    expect(hanging.length).toBe(1);
    leaving.abort();
    expect(await request).toBe("left");
    const after = await until((e) => delta(before, e, 'burrow_streams_reset_total{by="edge",code="CANCELLED"}') >= 1);
    expect(delta(before, after, 'burrow_streams_reset_total{by="edge",code="CANCELLED"}')).toBe(1);
    for (const release of hanging.splice(0)) release();
  });
});

describe("the admin API's own counters", () => {
  test("requests by route pattern, method and status; unmatched paths as one route", async () => {
    const before = await metrics();
    expect((await api.get("/api/users/987654")).status).toBe(404);
    expect((await api.get("/api/users")).status).toBe(200);
    expect((await api.get("/api/no/such/thing")).status).toBe(404);
    const after = await metrics();
    expect(delta(before, after, 'burrow_admin_requests_total{route="/api/users/:id",method="GET",status="404"}')).toBe(1);
    expect(delta(before, after, 'burrow_admin_requests_total{route="/api/users",method="GET",status="200"}')).toBe(1);
    expect(delta(before, after, 'burrow_admin_requests_total{route="unmatched",method="GET",status="404"}')).toBe(1);
    // the id is not a label: one series for every user's page
    expect(after.text).not.toContain("987654");
  });

  test("wrong passwords count as login failures; attempts while the username is locked count as throttled", async () => {
    const before = await metrics();
    const client = await signedIn(server);
    for (let i = 0; i < 5; i++) expect((await client.login("admin-who-is-not", "wrong-password-1")).status).toBe(401);
    expect((await client.login("admin-who-is-not", "wrong-password-1")).status).toBe(429);
    const after = await metrics();
    expect(delta(before, after, "burrow_admin_login_failures_total")).toBe(5);
    expect(delta(before, after, "burrow_admin_logins_throttled_total")).toBe(1);
    expect(delta(before, after, 'burrow_admin_requests_total{route="/api/auth/login",method="POST",status="429"}')).toBe(1);
  });

  test("process gauges: memory, CPU, descriptors, event-loop lag", async () => {
    const e = await metrics();
    expect(sample(e, "burrow_process_resident_memory_bytes")).toBeGreaterThan(10 * 1024 * 1024);
    expect(sample(e, 'burrow_process_cpu_seconds_total{mode="user"}')).toBeGreaterThan(0);
    expect(sample(e, "burrow_process_open_fds")).toBeGreaterThan(5);
    expect(sample(e, "burrow_process_max_fds")).toBeGreaterThanOrEqual(sample(e, "burrow_process_open_fds"));
    expect(e.samples.has("burrow_event_loop_lag_p99_seconds")).toBe(true);
    expect(e.samples.has("burrow_event_loop_lag_max_seconds")).toBe(true);
    expect(sample(e, "burrow_process_start_time_seconds")).toBeGreaterThan(Date.now() / 1000 - 600);
  });
});
