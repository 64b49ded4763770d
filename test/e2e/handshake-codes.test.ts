/**
 * The handshake's refusals, one code per check, in the order the checks run:
 * token valid, token enabled, user enabled, protocol, proxy, devices,
 * tunnels, traffic, subdomain valid / reserved / in use, port. A refused
 * agent prints the code and a sentence, and exits non-zero at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { rmSync } from "node:fs";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch, type AgentStart } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startTinyproxy, tinyproxyAvailable, type TestHttpProxy } from "../harness/tinyproxy.ts";
import { echoThrough, freeRange } from "../harness/ports.ts";

const EXIT_WAIT_MS = 10_000;

let server: TestServer;
let api: AdminClient;
let tcpRange: { first: number; last: number };
let userCount = 0;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream ${new URL(req.url).pathname}`) });
/** A local TCP service that greets first ("ready\n"), then echoes. */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

/** Debian's tinyproxy on loopback (test/harness/tinyproxy.ts): a real HTTP proxy, whose log names each CONNECT. */
let proxy: TestHttpProxy | undefined;
const hasProxy = tinyproxyAvailable();
const proxyUrl = () => proxy!.url;
const CONNECT_LINE = /: (CONNECT \S+ HTTP\/1\.[01])$/;

/** The CONNECT requests the proxy logged from its line `from` on, once the first has been logged. */
async function connectsSince(from: number): Promise<string[]> {
  await proxy!.log.waitFor(CONNECT_LINE, 10_000, from);
  return proxy!.log.lines.slice(from).flatMap((l) => CONNECT_LINE.exec(l)?.[1] ?? []);
}

interface TestUser {
  id: number;
  username: string;
  token: string;
  tokenId: number;
}

/** A fresh user with `settings` (snake_case, as the API takes them) and one token. */
async function newUser(settings: Record<string, unknown> = {}): Promise<TestUser> {
  const username = `hs${++userCount}`;
  const id = await api.createUser(username, settings);
  const { token, tokenId } = await newToken(id);
  return { id, username, token, tokenId };
}

async function newToken(userId: number): Promise<{ token: string; tokenId: number }> {
  const res = await api.post(`/api/users/${userId}/tokens`, { device_name: `device-${Math.random()}` });
  expect(res.status).toBe(201);
  return { token: res.body.token, tokenId: res.body.token_id };
}

type AgentArgs = Omit<AgentStart, "server" | "target" | "kind"> & { kind?: "http" | "tcp" };

function agentOpts(a: AgentArgs): AgentStart {
  const kind = a.kind ?? "http";
  return { kind, target: kind === "http" ? upstream.port! : echo.port, server: server.edgeUrl, ...a };
}

/** Runs an agent that should be refused; returns its exit code and output once it has exited (bounded). */
async function runRefused(a: AgentArgs): Promise<{ exitCode: number | null; text: string; stderr: string[] }> {
  const { proc, output, home } = spawnAgent(agentOpts(a));
  const timer = setTimeout(() => proc.kill("SIGKILL"), EXIT_WAIT_MS);
  try {
    const exitCode = await proc.exited;
    await output.closed();
    return { exitCode, text: output.text(), stderr: output.lines.filter((l) => l.startsWith("burrow:")) };
  } finally {
    clearTimeout(timer);
    rmSync(home, { recursive: true, force: true });
  }
}

/** The agent was refused with `code`: one "burrow: refused" line with a sentence, exit 1, never forwarded, never retried. */
async function expectRefused(a: AgentArgs, code: string): Promise<string> {
  const r = await runRefused(a);
  expect(r.text).not.toContain("Forwarding");
  expect(r.text).not.toContain("reconnecting");
  expect(r.stderr).toHaveLength(1);
  expect(r.stderr[0]).toMatch(new RegExp(`^burrow: refused by the server: ${code}: \\S.{8,}`));
  expect(r.exitCode).toBe(1);
  return r.stderr[0]!;
}

beforeAll(async () => {
  tcpRange = freeRange(8);
  server = await startServer({ args: ["--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });
  api = await signedIn(server);
  if (hasProxy) proxy = await startTinyproxy();
});

afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
  await proxy?.stop();
});

describe("each check refuses with its own code", () => {
  test("a token the server never issued is refused with AUTH_FAILED", async () => {
    await expectRefused({ token: "brw_" + "x".repeat(43) }, "AUTH_FAILED");
  });

  test("a garbage token is refused with AUTH_FAILED", async () => {
    await expectRefused({ token: "not a token at all" }, "AUTH_FAILED");
  });

  test("a real token with one character changed is refused with AUTH_FAILED", async () => {
    const u = await newUser();
    const last = u.token.at(-1) === "a" ? "b" : "a";
    await expectRefused({ token: u.token.slice(0, -1) + last }, "AUTH_FAILED");
  });

  test("a revoked token is refused with TOKEN_DISABLED", async () => {
    const u = await newUser();
    expect((await api.delete(`/api/tokens/${u.tokenId}`)).body).toEqual({ status: "revoked" });
    await expectRefused({ token: u.token }, "TOKEN_DISABLED");
  });

  test("a disabled user's token is refused with USER_DISABLED", async () => {
    const u = await newUser();
    expect((await api.put(`/api/users/${u.id}`, { enabled: false })).status).toBe(200);
    await expectRefused({ token: u.token }, "USER_DISABLED");
  });

  test("a user allowed only http who opens a tcp tunnel is refused with PROTOCOL_DENIED", async () => {
    const u = await newUser({ allowed_protocols: "http" });
    await expectRefused({ kind: "tcp", token: u.token }, "PROTOCOL_DENIED");
    // the protocol they may use still works
    await using agent = await startAgent(agentOpts({ token: u.token }));
    expect(agent.subdomain).toBeDefined();
  });

  test("a user allowed only tcp who opens an http tunnel is refused with PROTOCOL_DENIED", async () => {
    const u = await newUser({ allowed_protocols: "tcp" });
    await expectRefused({ token: u.token }, "PROTOCOL_DENIED");
  });

  test.skipIf(!hasProxy)("a user who may not use a proxy is refused with PROXY_DENIED when the agent comes through one", async () => {
    const u = await newUser({ can_use_proxy: false });
    const before = proxy!.log.lines.length;
    await expectRefused({ token: u.token, args: ["--proxy", proxyUrl()] }, "PROXY_DENIED");
    // the refusal came from the server, reached through the proxy
    expect(await connectsSince(before)).toEqual([`CONNECT 127.0.0.1:${server.edgePort} HTTP/1.1`]);
    // without the proxy the same user connects
    await using direct = await startAgent(agentOpts({ token: u.token }));
    expect(direct.subdomain).toBeDefined();
  });

  test.skipIf(!hasProxy)("a user who may use a proxy connects through it, and the tunnel works", async () => {
    const u = await newUser({ can_use_proxy: true });
    const before = proxy!.log.lines.length;
    await using agent = await startAgent(agentOpts({ token: u.token, args: ["--proxy", proxyUrl()] }));
    expect(await connectsSince(before)).toEqual([`CONNECT 127.0.0.1:${server.edgePort} HTTP/1.1`]);
    const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/via-proxy");
    expect(await res.text()).toBe("upstream /via-proxy");
  });

  test("with max_devices 1, a second token of the user is refused with DEVICE_LIMIT while the first is connected", async () => {
    const u = await newUser({ max_devices: 1 });
    const second = await newToken(u.id);
    await using first = await startAgent(agentOpts({ token: u.token }));
    const line = await expectRefused({ token: second.token }, "DEVICE_LIMIT");
    expect(line).toContain("1");
    // the same device (token) opening another tunnel is not another device
    await using again = await startAgent(agentOpts({ token: u.token }));
    expect(again.subdomain).not.toBe(first.subdomain);
    // once the first device is gone, the other one may come
    expect(await first.stop()).toBe(0);
    expect(await again.stop()).toBe(0);
    await using other = await startAgent(agentOpts({ token: second.token }));
    expect(other.subdomain).toBeDefined();
  });

  test("with max_tunnels 1, a second tunnel is refused with TUNNEL_LIMIT", async () => {
    const u = await newUser({ max_tunnels: 1 });
    await using first = await startAgent(agentOpts({ token: u.token }));
    await expectRefused({ token: u.token }, "TUNNEL_LIMIT");
    await expectRefused({ kind: "tcp", token: u.token }, "TUNNEL_LIMIT");
    expect(await first.stop()).toBe(0);
    await using next = await startAgent(agentOpts({ token: u.token }));
    expect(next.subdomain).toBeDefined();
  });

  test("a user whose traffic this period has reached traffic_limit is refused with TRAFFIC_EXCEEDED", async () => {
    const u = await newUser({ traffic_limit: 1000, traffic_period: "daily" });
    await using agent = await startAgent(agentOpts({ token: u.token }));
    await agent.stop();
    addTraffic(u.id, 600, 400); // exactly the limit
    await expectRefused({ token: u.token }, "TRAFFIC_EXCEEDED");
  });

  test("traffic just under traffic_limit still lets the user in", async () => {
    const u = await newUser({ traffic_limit: 1000, traffic_period: "daily" });
    addTraffic(u.id, 600, 399);
    await using agent = await startAgent(agentOpts({ token: u.token }));
    expect(agent.subdomain).toBeDefined();
  });

  test("with the default monthly period, today's traffic at the limit is refused with TRAFFIC_EXCEEDED", async () => {
    const u = await newUser({ traffic_limit: 5000 });
    addTraffic(u.id, 2500, 2500);
    await expectRefused({ token: u.token }, "TRAFFIC_EXCEEDED");
  });

  test("traffic of an earlier period does not count: a daily user over the limit yesterday gets in today", async () => {
    const u = await newUser({ traffic_limit: 1000, traffic_period: "daily" });
    const yesterday = new Date(Date.now() - 24 * 3600 * 1000).toISOString().slice(0, 10);
    addTraffic(u.id, 50_000, 50_000, yesterday);
    await using agent = await startAgent(agentOpts({ token: u.token }));
    expect(agent.subdomain).toBeDefined();
  });

  test("an invalid subdomain is refused with SUBDOMAIN_INVALID", async () => {
    const u = await newUser();
    await expectRefused({ token: u.token, args: ["--subdomain", "bad_name!"] }, "SUBDOMAIN_INVALID");
    await expectRefused({ token: u.token, args: ["--subdomain=-dash"] }, "SUBDOMAIN_INVALID");
    await expectRefused({ token: u.token, args: ["--subdomain", "a".repeat(64)] }, "SUBDOMAIN_INVALID");
  });

  test("a subdomain reserved for another user is refused with SUBDOMAIN_RESERVED, and its owner gets it", async () => {
    const a = await newUser();
    const b = await newUser();
    expect((await api.post("/api/domains", { subdomain: "taken1", user_id: b.id })).status).toBe(201);
    await expectRefused({ token: a.token, args: ["--subdomain", "taken1"] }, "SUBDOMAIN_RESERVED");
    await using owner = await startAgent(agentOpts({ token: b.token, args: ["--subdomain", "taken1"] }));
    expect(owner.subdomain).toBe("taken1");
    expect(await (await tunnelFetch(server.edgePort, "taken1", "/mine")).text()).toBe("upstream /mine");
  });

  test("a system name is refused with SUBDOMAIN_RESERVED", async () => {
    const u = await newUser();
    await expectRefused({ token: u.token, args: ["--subdomain", "www"] }, "SUBDOMAIN_RESERVED");
    await expectRefused({ token: u.token, args: ["--subdomain", "admin"] }, "SUBDOMAIN_RESERVED");
  });

  test("a subdomain held by another user's live tunnel is refused with SUBDOMAIN_TAKEN", async () => {
    const a = await newUser();
    const b = await newUser();
    await using holder = await startAgent(agentOpts({ token: a.token, args: ["--subdomain", "busyname"] }));
    await expectRefused({ token: b.token, args: ["--subdomain", "busyname"] }, "SUBDOMAIN_TAKEN");
    // also another live agent of the same token cannot take it from a running tunnel
    await expectRefused({ token: a.token, args: ["--subdomain", "busyname"] }, "SUBDOMAIN_TAKEN");
    expect(await (await tunnelFetch(server.edgePort, "busyname", "/still")).text()).toBe("upstream /still");
  });

  test("a remote port outside the server's TCP range is refused with PORT_UNAVAILABLE", async () => {
    const u = await newUser();
    const line = await expectRefused({ kind: "tcp", token: u.token, args: ["--remote-port", String(tcpRange.last + 1)] }, "PORT_UNAVAILABLE");
    expect(line).toContain(`${tcpRange.first}-${tcpRange.last}`);
    await expectRefused({ kind: "tcp", token: u.token, args: ["--remote-port", String(tcpRange.first - 1)] }, "PORT_UNAVAILABLE");
  });

  test("a remote port already held by another tunnel is refused with PORT_UNAVAILABLE", async () => {
    const a = await newUser();
    const b = await newUser();
    const port = tcpRange.first + 1;
    await using holder = await startAgent(agentOpts({ kind: "tcp", token: a.token, args: ["--remote-port", String(port)] }));
    expect(holder.port).toBe(port);
    await expectRefused({ kind: "tcp", token: b.token, args: ["--remote-port", String(port)] }, "PORT_UNAVAILABLE");
  });

  test("a remote port in the range but bound by another program is refused with PORT_UNAVAILABLE", async () => {
    const u = await newUser();
    const port = tcpRange.first + 2;
    const squatter = Bun.listen({ hostname: "127.0.0.1", port, socket: { data() {} } });
    try {
      await expectRefused({ kind: "tcp", token: u.token, args: ["--remote-port", String(port)] }, "PORT_UNAVAILABLE");
    } finally {
      squatter.stop(true);
    }
  });
});

/** Writes traffic straight into the daily table, for today (UTC), as the meter would. */
function addTraffic(userId: number, bytesIn: number, bytesOut: number, date = new Date().toISOString().slice(0, 10)): void {
  const db = new Database(join(server.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.query(
      `INSERT INTO traffic_daily (user_id, date, bytes_in, bytes_out) VALUES (?1, ?2, ?3, ?4)
       ON CONFLICT (user_id, date) DO UPDATE SET bytes_in = bytes_in + ?3, bytes_out = bytes_out + ?4`,
    ).run(userId, date, bytesIn, bytesOut);
  } finally {
    db.close();
  }
}

describe("when two checks fail, the earlier one in the order decides", () => {
  test("a revoked token of a disabled user gives TOKEN_DISABLED", async () => {
    const u = await newUser();
    await api.put(`/api/users/${u.id}`, { enabled: false });
    await api.delete(`/api/tokens/${u.tokenId}`);
    await expectRefused({ token: u.token }, "TOKEN_DISABLED");
  });

  test("a disabled user asking for a subdomain reserved for someone else gives USER_DISABLED", async () => {
    const owner = await newUser();
    const u = await newUser();
    await api.post("/api/domains", { subdomain: "order-reserved", user_id: owner.id });
    await api.put(`/api/users/${u.id}`, { enabled: false });
    await expectRefused({ token: u.token, args: ["--subdomain", "order-reserved"] }, "USER_DISABLED");
  });

  test("a disabled user opening a protocol they may not use gives USER_DISABLED", async () => {
    const u = await newUser({ allowed_protocols: "http" });
    await api.put(`/api/users/${u.id}`, { enabled: false });
    await expectRefused({ kind: "tcp", token: u.token }, "USER_DISABLED");
  });

  test.skipIf(!hasProxy)("a denied protocol through a denied proxy gives PROTOCOL_DENIED", async () => {
    const u = await newUser({ allowed_protocols: "http", can_use_proxy: false });
    await expectRefused({ kind: "tcp", token: u.token, args: ["--proxy", proxyUrl()] }, "PROTOCOL_DENIED");
  });

  test.skipIf(!hasProxy)("a denied proxy for a device over the device limit gives PROXY_DENIED", async () => {
    const u = await newUser({ can_use_proxy: false, max_devices: 1 });
    const second = await newToken(u.id);
    await using first = await startAgent(agentOpts({ token: u.token }));
    await expectRefused({ token: second.token, args: ["--proxy", proxyUrl()] }, "PROXY_DENIED");
  });

  test("a device over the limit asking for more tunnels than allowed gives DEVICE_LIMIT", async () => {
    const u = await newUser({ max_devices: 1, max_tunnels: 1 });
    const second = await newToken(u.id);
    await using first = await startAgent(agentOpts({ token: u.token }));
    await expectRefused({ token: second.token }, "DEVICE_LIMIT");
  });

  // (tunnel limit against traffic limit cannot be staged: a user over quota loses their live tunnels within a second)
  test("a user at the tunnel limit asking for an invalid subdomain gives TUNNEL_LIMIT", async () => {
    const u = await newUser({ max_tunnels: 1 });
    await using first = await startAgent(agentOpts({ token: u.token }));
    await expectRefused({ token: u.token, args: ["--subdomain", "bad_name!"] }, "TUNNEL_LIMIT");
  });

  test.skipIf(!hasProxy)("a denied proxy for a user over the traffic limit gives PROXY_DENIED", async () => {
    const u = await newUser({ can_use_proxy: false, traffic_limit: 1000, traffic_period: "daily" });
    addTraffic(u.id, 1000, 1000);
    await expectRefused({ token: u.token, args: ["--proxy", proxyUrl()] }, "PROXY_DENIED");
  });

  test("a user over the traffic limit asking for an invalid subdomain gives TRAFFIC_EXCEEDED", async () => {
    const u = await newUser({ traffic_limit: 1000, traffic_period: "daily" });
    addTraffic(u.id, 0, 5000);
    await expectRefused({ token: u.token, args: ["--subdomain", "bad_name!"] }, "TRAFFIC_EXCEEDED");
  });

  test("a user over the traffic limit asking for a port outside the range gives TRAFFIC_EXCEEDED", async () => {
    const u = await newUser({ traffic_limit: 1000, traffic_period: "daily" });
    addTraffic(u.id, 5000, 0);
    await expectRefused({ kind: "tcp", token: u.token, args: ["--remote-port", String(tcpRange.last + 1)] }, "TRAFFIC_EXCEEDED");
  });

  test("a name both reserved for someone else and live on their tunnel gives SUBDOMAIN_RESERVED", async () => {
    const owner = await newUser();
    const u = await newUser();
    await api.post("/api/domains", { subdomain: "reserved-live", user_id: owner.id });
    await using live = await startAgent(agentOpts({ token: owner.token, args: ["--subdomain", "reserved-live"] }));
    await expectRefused({ token: u.token, args: ["--subdomain", "reserved-live"] }, "SUBDOMAIN_RESERVED");
  });
});

describe("what a successful handshake gives", () => {
  test("without --subdomain the tunnel gets a random 8-character name of a-z and 0-9", async () => {
    const u = await newUser();
    const names = new Set<string>();
    for (let i = 0; i < 3; i++) {
      await using agent = await startAgent(agentOpts({ token: u.token }));
      expect(agent.subdomain).toMatch(/^[a-z0-9]{8}$/);
      expect(agent.publicUrl).toBe(`http://${agent.subdomain}.localhost:${server.edgePort}`);
      names.add(agent.subdomain!);
    }
    expect(names.size).toBe(3);
  });

  test("a subdomain is taken in lower case", async () => {
    const u = await newUser();
    await using agent = await startAgent(agentOpts({ token: u.token, args: ["--subdomain", "MixedCase"] }));
    expect(agent.subdomain).toBe("mixedcase");
  });

  test("a tcp tunnel without --remote-port gets a port inside the range, and echoes", async () => {
    const u = await newUser();
    await using agent = await startAgent(agentOpts({ kind: "tcp", token: u.token }));
    expect(agent.port).toBeGreaterThanOrEqual(tcpRange.first);
    expect(agent.port).toBeLessThanOrEqual(tcpRange.last);
    expect(agent.publicUrl).toBe(`localhost:${agent.port}`);
    expect(await echoThrough(agent.port!, "ping")).toBe("ping");
  });

  test("the token's last_used is set by the handshake", async () => {
    const u = await newUser();
    const before = (await api.get(`/api/users/${u.id}/tokens`)).body.find((t: { id: number }) => t.id === u.tokenId);
    expect(before.last_used).toBeNull();
    const t0 = Date.now();
    await using agent = await startAgent(agentOpts({ token: u.token }));
    const after = (await api.get(`/api/users/${u.id}/tokens`)).body.find((t: { id: number }) => t.id === u.tokenId);
    expect(after.last_used).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{3})?Z$/);
    expect(Date.parse(after.last_used)).toBeGreaterThanOrEqual(t0 - 1000);
    expect(Date.parse(after.last_used)).toBeLessThanOrEqual(Date.now() + 1000);
  });

  test("a refused handshake does not mark the token as used", async () => {
    const u = await newUser({ allowed_protocols: "http" });
    await expectRefused({ kind: "tcp", token: u.token }, "PROTOCOL_DENIED");
    const row = (await api.get(`/api/users/${u.id}/tokens`)).body.find((t: { id: number }) => t.id === u.tokenId);
    expect(row.last_used).toBeNull();
  });
});

