/**
 * The catalogue's events as the real actions make them, on the real
 * server with real agents, delivered to a receiver that verifies each with
 * `standardwebhooks`: an agent connecting (tunnel.online, token.first_use)
 * and its traffic filling its user's quota (quota.warning, then
 * quota.exceeded, which closes the tunnel: tunnel.offline with its bytes
 * and seconds), the next handshake refused (tunnel.refused with its code),
 * a traffic policy's rate limit (policy.rate_limited, sampled), a hostname
 * an admin vouches for (hostname.verified) and a burst of failed sign-ins
 * (login.failed_burst).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

const BODY = "b".repeat(10_000);
const LIMIT = 200_000;

let server: TestServer;
let api: AdminClient;
let receiver: WebhookReceiver;
const agents: TestAgent[] = [];
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(BODY) });

beforeAll(async () => {
  server = await startServer({ args: ["--webhook-allow-private", "on", "--webhook-backoff-max", "1"] });
  api = await signedIn(server);
  receiver = startReceiver();
  const made = await api.post("/api/webhooks", { url: receiver.url, events: ["*"] });
  receiver.secrets.push(made.body.secret);
});
afterAll(async () => {
  for (const a of agents) await a.stop();
  await server?.stop();
  await receiver?.stop();
  upstream.stop(true);
});

const events = (type: string) => receiver.received.filter((r) => r.event.type === type).map((r) => r.event.data as Record<string, any>);
const arrived = (type: string, n = 1) => waitUntil(() => events(type).length >= n, 20_000, `${type} x${n}`);

test("an agent connects, its traffic fills the quota, the tunnel closes, the next handshake is refused", async () => {
  const userId = await api.createUser("quota", { traffic_limit: LIMIT, skip_warning: true });
  const token = await api.createToken(userId, "laptop");
  const agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "quota"] });
  agents.push(agent);
  await arrived("tunnel.online");
  await arrived("token.first_use");
  const online = events("tunnel.online")[0]!;
  expect(online).toMatchObject({ user_id: userId, username: "quota", kind: "http", node: "local" });
  expect(online.address).toContain("quota.localhost");
  expect(events("token.first_use")[0]).toMatchObject({ user_id: userId, device_name: "laptop", address: "127.0.0.1" });

  // traffic until the quota closes the tunnel
  for (let i = 0; i < 60 && events("quota.exceeded").length === 0; i++) {
    await tunnelFetch(server.edgePort, "quota", `/${i}`).then((r) => r.text(), () => "");
    await Bun.sleep(i > 15 ? 200 : 0);
  }
  await arrived("quota.exceeded");
  await arrived("tunnel.offline");
  const types = receiver.received.map((r) => r.event.type);
  expect(types.indexOf("quota.warning")).toBeGreaterThan(-1);
  expect(types.indexOf("quota.warning")).toBeLessThan(types.indexOf("quota.exceeded"));
  expect(events("quota.exceeded")[0]).toMatchObject({ user_id: userId, limit: LIMIT, period: "monthly", percent: 100 });
  expect(events("quota.exceeded")[0]!.used).toBeGreaterThanOrEqual(LIMIT);
  const offline = events("tunnel.offline")[0]!;
  expect(offline.tunnel_id).toBe(online.tunnel_id);
  expect(offline.bytes_out).toBeGreaterThan(100_000);
  expect(offline.bytes_in).toBeGreaterThan(0);
  expect(offline.duration_s).toBeGreaterThanOrEqual(0);

  // said once a period, however often the check finds it
  await Bun.sleep(2_000);
  expect(events("quota.warning")).toHaveLength(1);
  expect(events("quota.exceeded")).toHaveLength(1);

  expect(await refusal({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "quota"] })).toContain("TRAFFIC_EXCEEDED");
  await arrived("tunnel.refused");
  expect(events("tunnel.refused")[0]).toMatchObject({ code: "TRAFFIC_EXCEEDED", user_id: userId, username: "quota", address: "127.0.0.1" });
  // a token that is no one's: said with no user
  await refusal({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: "brw_" + "x".repeat(43) });
  await arrived("tunnel.refused", 2);
  expect(events("tunnel.refused")[1]).toMatchObject({ code: "AUTH_FAILED", user_id: null, username: null, token_id: null });
});

test("a traffic policy's rate limit: one event for the first refusal, the rest of the minute counted", async () => {
  const userId = await api.createUser("limited", { skip_warning: true });
  const policy = `
on_http_request:
  - actions:
      - type: rate-limit
        config: { name: tight, algorithm: sliding_window, capacity: 1, rate: 60s, bucket_key: [conn.client_ip] }
`;
  expect((await api.post("/api/policies", { name: "tight", scope: "user", user_id: userId, policy })).status).toBe(201);
  const agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: await api.createToken(userId), args: ["--subdomain", "limited"] });
  agents.push(agent);
  const statuses: number[] = [];
  for (let i = 0; i < 6; i++) statuses.push((await tunnelFetch(server.edgePort, "limited", "/")).status);
  expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(4);
  await arrived("policy.rate_limited");
  await Bun.sleep(1_000);
  expect(events("policy.rate_limited")).toHaveLength(1);
  expect(events("policy.rate_limited")[0]).toMatchObject({ user_id: userId, username: "limited", refused: 1 });
});

test("a hostname an admin vouches for, and a burst of failed sign-ins", async () => {
  const userId = await api.createUser("hosted");
  expect((await api.post("/api/hostnames", { hostname: "demo.acme.test", user_id: userId, verified: true })).status).toBe(201);
  await arrived("hostname.verified");
  expect(events("hostname.verified")[0]).toMatchObject({ user_id: userId, username: "hosted", hostname: "demo.acme.test" });

  for (let i = 0; i < 5; i++) await api.call("POST", "/api/auth/login", { username: "admin", password: "not-the-password" });
  await arrived("login.failed_burst");
  expect(events("login.failed_burst")[0]).toMatchObject({ username: "admin", address: "127.0.0.1", failures: 5, locked_for_s: 30 });
});
