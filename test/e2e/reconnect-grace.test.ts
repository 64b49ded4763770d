/**
 * The grace period: a tunnel whose agent vanished without a goodbye keeps
 * its name or port for the same token for a while, so the agent (or its
 * replacement) gets it back; nobody else does. Ctrl-C is a goodbye: the
 * name is free at once. A dropped connection (cut here by the proxy the
 * agent goes through) is retried and the name comes back.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { createServer, connect, type Server as NetServer, type Socket } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch, type AgentStart, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { freeRange } from "../harness/ports.ts";

let server: TestServer;
let api: AdminClient;
let tcpRange: { first: number; last: number };
let userCount = 0;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("here") });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

/** A CONNECT proxy whose tunnelled connections the test can cut: agent side -> server side. */
let proxy: NetServer;
const pairs = new Map<Socket, Socket>();
const proxyUrl = () => `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;

/**
 * Cuts every proxied connection. Both sides: the server sees the close.
 * Agent side only: the server's side stays open and silent, a half-open
 * connection the server still takes for live.
 */
function cut(how: "both" | "agent side only"): number {
  const n = pairs.size;
  for (const [client, target] of pairs) {
    client.unpipe(target);
    target.unpipe(client);
    client.destroy();
    if (how === "both") target.destroy();
  }
  pairs.clear();
  return n;
}

/** Waits (bounded) until earlier tests' proxied connections have closed, so cut() counts only this test's. */
async function noProxiedConnections(): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (pairs.size > 0 && Date.now() < deadline) await Bun.sleep(20);
  expect(pairs.size).toBe(0);
}

beforeAll(async () => {
  tcpRange = freeRange(6);
  server = await startServer({ args: ["--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });
  api = await signedIn(server);
  proxy = createServer((client) => {
    client.once("data", (chunk) => {
      const m = /^CONNECT ([^:\s]+):(\d+) /.exec(chunk.toString());
      if (!m) return void client.destroy();
      const target = connect(Number(m[2]), m[1]!, () => {
        client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
        client.pipe(target).pipe(client);
      });
      pairs.set(client, target);
      // the server closing its side ends the agent's too: left to the pipe, the agent's side would stay
      // half-open (its reader paused) and outlive the test
      target.on("error", () => client.destroy()).on("close", () => client.destroy());
      client.on("error", () => target.destroy()).on("close", () => pairs.delete(client));
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  for (const [client, target] of pairs) client.destroy(), target.destroy();
  proxy?.close();
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
});

async function newUser() {
  const id = await api.createUser(`gr${++userCount}`);
  return { id, ...(await newToken(id)) };
}

async function newToken(userId: number) {
  const res = await api.post(`/api/users/${userId}/tokens`, { device_name: "laptop" });
  return { token: res.body.token as string, tokenId: res.body.token_id as number };
}

const http = (token: string, subdomain?: string, extra: string[] = []) =>
  ({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: [...(subdomain ? ["--subdomain", subdomain] : []), ...extra] }) as AgentStart;
const tcp = (token: string, port?: number) =>
  ({ kind: "tcp", target: echo.port, server: server.edgeUrl, token, args: port ? ["--remote-port", String(port)] : [] }) as AgentStart;

/** The listed live tunnels, as names or port numbers. */
async function active(): Promise<string[]> {
  return (await api.get("/api/tunnels/active")).body.map((t: { subdomain?: string; port?: number }) => t.subdomain ?? String(t.port));
}

/** SIGKILL: the agent gets no chance to say goodbye. Returns once the server has noticed. */
async function crash(agent: TestAgent, name: string): Promise<void> {
  await agent.stop("SIGKILL");
  const deadline = performance.now() + 5_000;
  while ((await active()).includes(name)) {
    if (performance.now() > deadline) throw new Error(`the server still lists ${name} 5 s after the agent died`);
    await Bun.sleep(50);
  }
}

test("a crashed agent's subdomain stays held: another user gets SUBDOMAIN_TAKEN, the same token gets it back at once", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token, "keepme"));
  await crash(first, "keepme");

  // held, agentless: visitors are told the agent is away, not that the name is unknown
  expect((await tunnelFetch(server.edgePort, "keepme", "/")).status).toBe(502);
  expect(await refusal(http(b.token, "keepme"))).toMatch(/^burrow: refused by the server: SUBDOMAIN_TAKEN: /);

  await using back = await startAgent(http(a.token, "keepme"));
  expect(back.subdomain).toBe("keepme");
  expect(await (await tunnelFetch(server.edgePort, "keepme", "/")).text()).toBe("here");
  expect(await active()).toContain("keepme");
});

test("a crashed agent's random subdomain is held the same way", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token));
  const name = first.subdomain!;
  await crash(first, name);
  expect(await refusal(http(b.token, name))).toMatch(/SUBDOMAIN_TAKEN/);
  await using back = await startAgent(http(a.token, name));
  expect(back.subdomain).toBe(name);
});

test("the grace period holds a name for the token, not for the user: the user's other token is refused too", async () => {
  const a = await newUser();
  const other = await newToken(a.id);
  const first = await startAgent(http(a.token, "pertoken"));
  await crash(first, "pertoken");
  expect(await refusal(http(other.token, "pertoken"))).toMatch(/SUBDOMAIN_TAKEN/);
  await using back = await startAgent(http(a.token, "pertoken"));
  expect(back.subdomain).toBe("pertoken");
});

test("a crashed agent's tcp port stays held: another user gets PORT_UNAVAILABLE, the same token gets it back", async () => {
  const a = await newUser();
  const b = await newUser();
  const port = tcpRange.first + 1;
  const first = await startAgent(tcp(a.token, port));
  expect(first.port).toBe(port);
  await crash(first, String(port));
  expect(await refusal(tcp(b.token, port))).toMatch(/^burrow: refused by the server: PORT_UNAVAILABLE: /);
  await using back = await startAgent(tcp(a.token, port));
  expect(back.port).toBe(port);
});

test("Ctrl-C exits 0 and frees the subdomain at once for anyone", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token, "letgo"));
  expect(await first.stop("SIGINT")).toBe(0);
  expect(await active()).not.toContain("letgo");
  expect((await tunnelFetch(server.edgePort, "letgo", "/")).status).toBe(404);
  await using taker = await startAgent(http(b.token, "letgo"));
  expect(taker.subdomain).toBe("letgo");
});

test("Ctrl-C frees a tcp port at once for anyone", async () => {
  const a = await newUser();
  const b = await newUser();
  const port = tcpRange.first + 2;
  const first = await startAgent(tcp(a.token, port));
  expect(await first.stop("SIGINT")).toBe(0);
  await using taker = await startAgent(tcp(b.token, port));
  expect(taker.port).toBe(port);
});

/** Waits (bounded) for the agent's n-th "Forwarding" line. */
async function nthForwarding(agent: TestAgent, n: number): Promise<string> {
  const deadline = performance.now() + 10_000;
  const lines = () => agent.output.lines.filter((l) => l.startsWith("Forwarding"));
  while (lines().length < n) {
    if (performance.now() > deadline) throw new Error(`no Forwarding line #${n}:\n${agent.output.text()}`);
    await Bun.sleep(20);
  }
  return lines()[n - 1]!;
}

test("when the connection drops under a running agent, it reconnects by itself and keeps its random name", async () => {
  const a = await newUser();
  await noProxiedConnections();
  await using agent = await startAgent(http(a.token, undefined, ["--proxy", proxyUrl()]));
  const name = agent.subdomain!;
  expect(cut("both")).toBe(1);

  expect(await agent.output.waitFor(/reconnecting in/, 5_000)).toContain("lost the connection to the server");
  expect(await nthForwarding(agent, 2)).toBe(await nthForwarding(agent, 1));
  expect(await (await tunnelFetch(server.edgePort, name, "/")).text()).toBe("here");
  expect((await active()).filter((n) => n === name)).toHaveLength(1);
});

test("an agent whose old connection the server still takes for live (half-open) resumes it, even at its tunnel limit", async () => {
  const a = await newUser();
  await api.put(`/api/users/${a.id}`, { max_tunnels: 1, max_devices: 1 });
  await noProxiedConnections();
  await using agent = await startAgent(http(a.token, "halfopen", ["--proxy", proxyUrl()]));
  expect(cut("agent side only")).toBe(1);
  // the server has heard nothing: the old session is still listed
  expect(await active()).toContain("halfopen");

  await agent.output.waitFor(/reconnecting in/, 5_000);
  expect(await nthForwarding(agent, 2)).toBe(await nthForwarding(agent, 1));
  // the new connection took over; the old one was told why and closed
  await server.output.waitFor(/agent connection closed .*SESSION_REPLACED/, 5_000);
  expect((await active()).filter((n) => n === "halfopen")).toHaveLength(1);
  expect(await (await tunnelFetch(server.edgePort, "halfopen", "/")).text()).toBe("here");
  expect(agent.output.text()).not.toContain("refused");
});

test("disabling the user frees a name held in grace at once", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token, "graceoff"));
  await crash(first, "graceoff");
  await api.put(`/api/users/${a.id}`, { enabled: false });
  expect((await tunnelFetch(server.edgePort, "graceoff", "/")).status).toBe(404);
  await using taker = await startAgent(http(b.token, "graceoff"));
  expect(taker.subdomain).toBe("graceoff");
});

test("revoking the token frees a name held in grace at once", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token, "gracerevoked"));
  await crash(first, "gracerevoked");
  await api.delete(`/api/tokens/${a.tokenId}`);
  await using taker = await startAgent(http(b.token, "gracerevoked"));
  expect(taker.subdomain).toBe("gracerevoked");
});

test("SIGTERM stops the agent like Ctrl-C: exit 0 and the name is free at once", async () => {
  const a = await newUser();
  const b = await newUser();
  const first = await startAgent(http(a.token, "termed"));
  expect(await first.stop("SIGTERM")).toBe(0);
  await using taker = await startAgent(http(b.token, "termed"));
  expect(taker.subdomain).toBe("termed");
});
