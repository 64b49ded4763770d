/** Realistic data for the panel: users with limits, tokens, reserved names and 30 days of traffic. */
import { Database } from "bun:sqlite";
import { join } from "node:path";
import type { AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import type { TestServer } from "../harness/server.ts";

const GB = 1024 ** 3;
const MB = 1024 ** 2;

export interface SeededUser {
  id: number;
  username: string;
}

const PEOPLE: { username: string; settings: Record<string, unknown>; dailyMb: number }[] = [
  { username: "alice", settings: { max_tunnels: 5, traffic_limit: 50 * GB, max_devices: 3, skip_warning: true }, dailyMb: 900 },
  { username: "bob", settings: { max_tunnels: 2, allowed_protocols: "http", traffic_limit: 5 * GB, traffic_period: "monthly", max_devices: 1 }, dailyMb: 140 },
  { username: "carol.dev", settings: { max_tunnels: 0, traffic_limit: 0, max_devices: 0 }, dailyMb: 420 },
  { username: "ci-runner", settings: { max_tunnels: 10, allowed_protocols: "tcp", traffic_limit: 2 * GB, traffic_period: "daily", can_use_proxy: false }, dailyMb: 60 },
  { username: "dana@ops", settings: { role: "admin" }, dailyMb: 12 },
  { username: "eve", settings: { enabled: false, traffic_limit: 1 * GB }, dailyMb: 0 },
];

/** Creates the people above and returns them by name. */
export async function seedUsers(api: AdminClient): Promise<Map<string, SeededUser>> {
  const out = new Map<string, SeededUser>();
  for (const p of PEOPLE) {
    const { enabled, ...create } = p.settings;
    const id = await api.createUser(p.username, create);
    if (enabled === false) await api.put(`/api/users/${id}`, { enabled: false });
    out.set(p.username, { id, username: p.username });
  }
  return out;
}

/** A smooth-ish, deterministic daily curve: weekday peaks, weekend dips, a little noise. */
function dayFactor(daysAgo: number, seed: number): number {
  const date = new Date(Date.now() - daysAgo * 86_400_000);
  const weekday = date.getUTCDay();
  const weekend = weekday === 0 || weekday === 6 ? 0.45 : 1;
  const trend = 0.7 + 0.3 * Math.sin((30 - daysAgo) / 6 + seed);
  const noise = 0.85 + 0.3 * Math.abs(Math.sin(daysAgo * 12.9898 + seed * 78.233));
  return weekend * trend * noise;
}

/** Writes 30 days of traffic into traffic_daily, as the edge's meter would have. */
export function seedTraffic(server: TestServer, users: Map<string, SeededUser>, days = 30) {
  const db = new Database(join(server.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const put = db.prepare(
      "INSERT INTO traffic_daily (user_id, date, bytes_in, bytes_out) VALUES (?, ?, ?, ?) " +
        "ON CONFLICT (user_id, date) DO UPDATE SET bytes_in = excluded.bytes_in, bytes_out = excluded.bytes_out",
    );
    PEOPLE.forEach((p, seed) => {
      const user = users.get(p.username);
      if (!user || p.dailyMb === 0) return;
      for (let ago = days - 1; ago >= 0; ago--) {
        const date = new Date(Date.now() - ago * 86_400_000).toISOString().slice(0, 10);
        const total = p.dailyMb * MB * dayFactor(ago, seed + 1) * (ago === 0 ? 0.55 : 1);
        const share = 0.12 + 0.1 * ((seed * 7 + ago) % 3) / 2;
        put.run(user.id, date, Math.round(total * share), Math.round(total * (1 - share)));
      }
    });
  } finally {
    db.close();
  }
}

export interface Scene extends AsyncDisposable {
  users: Map<string, SeededUser>;
  agents: TestAgent[];
}

/**
 * The people above with 30 days of traffic, device tokens (one revoked),
 * reserved subdomains, and three live tunnels from real agents that have
 * carried some requests.
 */
export async function seedScene(server: TestServer, api: AdminClient): Promise<Scene> {
  const users = await seedUsers(api);
  seedTraffic(server, users);
  const id = (name: string) => users.get(name)!.id;
  const token = (userId: number, device: string) => api.createToken(userId, device);

  const laptop = await token(id("alice"), "laptop");
  const desktop = await token(id("alice"), "studio-desktop");
  await token(id("alice"), "old-phone");
  const aliceTokens = (await api.get(`/api/users/${id("alice")}/tokens`)).body as { id: number; device_name: string }[];
  await api.delete(`/api/tokens/${aliceTokens.find((t) => t.device_name === "old-phone")!.id}`);
  const runner = await token(id("ci-runner"), "runner-1");
  await token(id("bob"), "phone");
  for (const [name, owner] of [["alice", "alice"], ["alice-api", "alice"], ["bob-blog", "bob"], ["status", "carol.dev"]] as const) {
    await api.post("/api/domains", { subdomain: name, user_id: id(owner) });
  }

  const body = "x".repeat(180_000);
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(body) });
  const target = `127.0.0.1:${upstream.port}`;
  const agents: TestAgent[] = [];
  const stop = async () => {
    for (const a of agents) await a.stop();
    upstream.stop(true);
  };
  try {
    agents.push(await startAgent({ kind: "http", target, server: server.edgeUrl, token: laptop, args: ["--subdomain", "alice"] }));
    agents.push(await startAgent({ kind: "http", target, server: server.edgeUrl, token: desktop, args: ["--subdomain", "alice-api"] }));
    agents.push(await startAgent({ kind: "tcp", target, server: server.edgeUrl, token: runner }));
    const skip = { headers: { "x-burrow-skip-warning": "1" } };
    for (let i = 0; i < 12; i++) await (await tunnelFetch(server.edgePort, "alice", `/page/${i}`, skip)).text();
    for (let i = 0; i < 5; i++) await (await tunnelFetch(server.edgePort, "alice-api", `/v1/items?page=${i}`, skip)).text();
  } catch (err) {
    await stop();
    throw err;
  }
  return { users, agents, [Symbol.asyncDispose]: stop };
}
