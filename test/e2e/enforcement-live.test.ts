/**
 * Live enforcement: what an admin takes away (a token, a user) and a quota
 * used up close the tunnels that are running now, within a second or two.
 * The agent is told why, prints it, and exits non-zero without retrying.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/** How long an admin action may take to reach the agent. */
const ENFORCE_MS = 2_500;
const MB = 1024 * 1024;

let server: TestServer;
let api: AdminClient;
let userCount = 0;
const big = new Uint8Array(MB).fill(0x61);
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => (new URL(req.url).pathname === "/big" ? new Response(big) : new Response("small")),
});

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
});

async function newUser(settings: Record<string, unknown> = {}) {
  const id = await api.createUser(`enf${++userCount}`, settings);
  const res = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
  return { id, token: res.body.token as string, tokenId: res.body.token_id as number };
}

async function newToken(userId: number) {
  const res = await api.post(`/api/users/${userId}/tokens`, { device_name: "desktop" });
  return { token: res.body.token as string, tokenId: res.body.token_id as number };
}

const open = (token: string) => startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });

/** Waits (bounded) for the agent to exit; returns its exit code and how long it took. */
async function exitWithin(agent: TestAgent, ms: number): Promise<{ code: number | null; ms: number }> {
  const t0 = performance.now();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`agent still running after ${ms} ms:\n${agent.output.text()}`)), ms);
  });
  try {
    const code = await Promise.race([agent.proc.exited, timeout]);
    await agent.output.closed();
    return { code, ms: performance.now() - t0 };
  } finally {
    clearTimeout(timer);
  }
}

async function activeSubdomains(): Promise<string[]> {
  const res = await api.get("/api/tunnels/active");
  expect(res.status).toBe(200);
  return res.body.map((t: { subdomain?: string; port?: number }) => t.subdomain ?? String(t.port));
}

/** The agent printed the refusal with `code`, never went back to reconnecting, and exited 1. */
function expectClosedWith(agent: TestAgent, exit: { code: number | null }, code: string): string {
  const refusals = agent.output.lines.filter((l) => l.startsWith("burrow: refused"));
  expect(refusals).toHaveLength(1);
  expect(refusals[0]).toMatch(new RegExp(`^burrow: refused by the server: ${code}: \\S.{8,}`));
  expect(agent.output.text()).not.toContain("reconnecting");
  expect(exit.code).toBe(1);
  return refusals[0]!;
}

test("revoking the token closes its live tunnel: the agent prints TOKEN_DISABLED and exits, the name answers 404", async () => {
  const u = await newUser();
  await using agent = await open(u.token);
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/")).status).toBe(200);
  expect(await activeSubdomains()).toContain(agent.subdomain!);

  expect((await api.delete(`/api/tokens/${u.tokenId}`)).body).toEqual({ status: "revoked" });
  // gone from the registry by the time the API answered
  expect(await activeSubdomains()).not.toContain(agent.subdomain!);
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/")).status).toBe(404);

  const exit = await exitWithin(agent, ENFORCE_MS);
  expectClosedWith(agent, exit, "TOKEN_DISABLED");
});

test("revoking one token leaves the user's other device connected", async () => {
  const u = await newUser();
  const other = await newToken(u.id);
  await using revoked = await open(u.token);
  await using kept = await open(other.token);
  await api.delete(`/api/tokens/${u.tokenId}`);
  expectClosedWith(revoked, await exitWithin(revoked, ENFORCE_MS), "TOKEN_DISABLED");
  expect(await activeSubdomains()).toContain(kept.subdomain!);
  expect(await (await tunnelFetch(server.edgePort, kept.subdomain!, "/")).text()).toBe("small");
  expect(kept.proc.exitCode).toBeNull();
});

test("disabling the user closes all their live tunnels with USER_DISABLED", async () => {
  const u = await newUser();
  const second = await newToken(u.id);
  const bystander = await newUser();
  await using a = await open(u.token);
  await using b = await open(second.token);
  await using c = await open(bystander.token);

  expect((await api.put(`/api/users/${u.id}`, { enabled: false })).status).toBe(200);
  const active = await activeSubdomains();
  expect(active).not.toContain(a.subdomain!);
  expect(active).not.toContain(b.subdomain!);
  expect(active).toContain(c.subdomain!);
  expect((await tunnelFetch(server.edgePort, a.subdomain!, "/")).status).toBe(404);
  expect((await tunnelFetch(server.edgePort, b.subdomain!, "/")).status).toBe(404);

  expectClosedWith(a, await exitWithin(a, ENFORCE_MS), "USER_DISABLED");
  expectClosedWith(b, await exitWithin(b, ENFORCE_MS), "USER_DISABLED");
  expect((await tunnelFetch(server.edgePort, c.subdomain!, "/")).status).toBe(200);
});

test("changing something else about a user leaves their tunnel running", async () => {
  const u = await newUser();
  await using agent = await open(u.token);
  expect((await api.put(`/api/users/${u.id}`, { max_tunnels: 5, enabled: true })).status).toBe(200);
  expect(await activeSubdomains()).toContain(agent.subdomain!);
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/")).status).toBe(200);
});

test("deleting the user closes their live tunnel and the agent exits non-zero", async () => {
  const u = await newUser();
  await using agent = await open(u.token);
  expect((await api.delete(`/api/users/${u.id}`)).body).toEqual({ status: "deleted" });
  expect(await activeSubdomains()).not.toContain(agent.subdomain!);
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/")).status).toBe(404);
  const line = expectClosedWith(agent, await exitWithin(agent, ENFORCE_MS), "USER_DISABLED");
  expect(line).toContain("deleted");
});

test("using up the traffic quota while connected closes the tunnel with TRAFFIC_EXCEEDED", async () => {
  const u = await newUser({ traffic_limit: 200_000, traffic_period: "daily" });
  await using agent = await open(u.token);
  const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/big");
  expect(res.status).toBe(200);
  let received = 0;
  try {
    for await (const chunk of res.body!) received += chunk.byteLength;
  } catch {
    // the tunnel may be closed mid-download: that is the point
  }
  expect(received).toBeGreaterThan(200_000);
  const exit = await exitWithin(agent, 3_000);
  expectClosedWith(agent, exit, "TRAFFIC_EXCEEDED");
  expect(await activeSubdomains()).not.toContain(agent.subdomain!);
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/")).status).toBe(404);
  const details = await api.get(`/api/users/${u.id}`);
  expect(details.body.traffic_used).toBeGreaterThanOrEqual(200_000);
  // and the next connection is refused at the handshake
  const again = spawnAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: u.token });
  const timer = setTimeout(() => again.proc.kill("SIGKILL"), 5_000);
  expect(await again.proc.exited).toBe(1);
  clearTimeout(timer);
  await again.output.closed();
  rmSync(again.home, { recursive: true, force: true });
  expect(again.output.text()).toMatch(/^burrow: refused by the server: TRAFFIC_EXCEEDED: /m);
});

test("lowering a connected user's traffic_limit below what they used closes their tunnel with TRAFFIC_EXCEEDED", async () => {
  const u = await newUser();
  await using agent = await open(u.token);
  const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/big");
  expect((await res.arrayBuffer()).byteLength).toBe(MB);
  // unlimited so far: nothing happens
  await Bun.sleep(1_200);
  expect(agent.proc.exitCode).toBeNull();
  expect((await api.put(`/api/users/${u.id}`, { traffic_limit: 100_000, traffic_period: "daily" })).status).toBe(200);
  expectClosedWith(agent, await exitWithin(agent, 3_000), "TRAFFIC_EXCEEDED");
});
