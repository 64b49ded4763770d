/**
 * A narrowed traffic policy reaches what is already carried: a rule an
 * operator adds through /api/policies (server-wide here) holds on the
 * visits that stay once let through, not only on those that come after. A
 * raw tcp connection, a tls tunnel's connection (passed through, never
 * decrypted), a WebSocket's pipe, and a pipe relayed from another
 * node of a cluster are judged again by the new layers with the facts they
 * came with (their connection's, the request head of their upgrade): those
 * the layers refuse now end within the 5 s promise, the others go on; and
 * judging again costs the visitor nothing it paid already (a rate limit
 * does not count an open visit a second time).
 *
 * Each test holds two visits open and adds a policy that refuses one of
 * them: the one refused ending shows the change was judged, and the other
 * still answering shows what it let through was left alone.
 */
import type { TCPSocketListener } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect as tcpConnect, type Socket } from "node:net";
import { connect as tlsConnect } from "node:tls";
import { selfSignedCertificate } from "../harness/certs.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { endsWithin, wsStillEchoes } from "../harness/live-visits.ts";

/** The promise is 5 s; ten times that as the liveness bound. */
const WITHIN_MS = 50_000;

const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
/** Upgrades to /slow wait for this to be let go (a service slow to answer its 101). */
let slowUpgrades = Promise.withResolvers<void>();
let slowAsked = Promise.withResolvers<void>();
const wsEcho = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: async (req, srv) => {
    if (new URL(req.url).pathname === "/slow") {
      slowAsked.resolve();
      await slowUpgrades.promise;
    }
    return srv.upgrade(req) ? undefined : new Response("plain");
  },
  websocket: { message: (ws, m) => void ws.send(m) },
});

afterAll(() => {
  echo.stop(true);
  wsEcho.stop(true);
});

/** A tcp connection that echoed once (a TLS one to `tls`'s name, through its tunnel), with a promise of its close. */
async function heldOpen(port: number, tls?: { name: string; ca: string }): Promise<{ socket: Socket; closed: Promise<void> }> {
  const socket = tls ? tlsConnect({ host: "127.0.0.1", port, servername: tls.name, ca: tls.ca }) : tcpConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const echoed = new Promise<void>((resolve) => socket.once("data", () => resolve()));
  socket.write("ping");
  await Promise.race([echoed, closed.then(() => Promise.reject(new Error("the connection closed before it echoed")))]);
  return { socket, closed };
}

/** Whether `socket` still echoes what is written. */
async function echoes(socket: Socket): Promise<boolean> {
  const answered = new Promise<boolean>((resolve) => {
    socket.once("data", (d) => resolve(d.toString() === "still here"));
    socket.once("close", () => resolve(false));
  });
  socket.write("still here");
  return answered;
}

type OpenWebSocket = { ws: WebSocket; closed: Promise<void> };

/** A WebSocket through the edge at `edgePort` to the tunnel `sub`, open and echoing, with a promise of its close. */
async function webSocket(edgePort: number, sub: string, path: string, headers: Record<string, string> = {}): Promise<OpenWebSocket> {
  const ws = new WebSocket(`ws://127.0.0.1:${edgePort}${path}`, { headers: { host: `${sub}.localhost:${edgePort}`, ...headers } } as any);
  const closed = new Promise<void>((resolve) => ws.addEventListener("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve());
    ws.addEventListener("error", () => reject(new Error("the WebSocket did not open")));
  });
  if (!(await wsStillEchoes(ws))) throw new Error("the WebSocket did not echo");
  return { ws, closed };
}

async function addPolicy(api: AdminClient, name: string, policy: unknown): Promise<number> {
  const made = await api.post("/api/policies", { name, policy });
  expect(made.status).toBe(201);
  return made.body.id;
}

/**
 * Adds `policy` while `refused` and `kept` are open: the first must end, the
 * second still echo. Both are closed and the policy deleted after, whatever
 * happened.
 */
async function policyEndsOne(api: AdminClient, name: string, policy: unknown, refused: OpenWebSocket, kept: OpenWebSocket): Promise<void> {
  let id: number | undefined;
  try {
    id = await addPolicy(api, name, policy);
    expect(await endsWithin(refused.closed, WITHIN_MS)).toBe(true);
    expect(await wsStillEchoes(kept.ws)).toBe(true);
  } finally {
    refused.ws.close();
    kept.ws.close();
    if (id !== undefined) await api.delete(`/api/policies/${id}`);
  }
}

describe("a narrowed traffic policy reaches what is already carried", () => {
  let server: TestServer;
  let api: AdminClient;
  let token: string;

  beforeAll(async () => {
    server = await startServer();
    api = await signedIn(server);
    const userId = await api.createUser("carried", { skip_warning: true });
    token = await api.createToken(userId);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
  });

  test("a tcp connection an operator's on_tcp_connect rule refuses now is closed; one it does not refuse goes on; a new one is refused", async () => {
    await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token });
    const refused = await heldOpen(agent.port!);
    const kept = await heldOpen(agent.port!);
    const ids: number[] = [];
    try {
      // refuses the first connection alone (by its port): the second is judged by the same change and left open
      ids.push(await addPolicy(api, "one-port", { on_tcp_connect: [{ expressions: [`conn.client_port == ${refused.socket.localPort}`], actions: [{ type: "deny" }] }] }));
      expect(await endsWithin(refused.closed, WITHIN_MS)).toBe(true);
      expect(await echoes(kept.socket)).toBe(true);
      // then the whole address: the open connection goes too, and a new one is not carried
      ids.push(await addPolicy(api, "no-loopback", { on_tcp_connect: [{ actions: [{ type: "restrict-ips", config: { deny: ["127.0.0.1/32", "::1/128"] } }] }] }));
      expect(await endsWithin(kept.closed, WITHIN_MS)).toBe(true);
      await expect(heldOpen(agent.port!)).rejects.toThrow();
    } finally {
      refused.socket.destroy();
      kept.socket.destroy();
      for (const id of ids) await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);

  test("a WebSocket's pipe whose upgrade an on_http_request rule refuses now is closed; another's goes on", async () => {
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token });
    const refused = await webSocket(server.edgePort, agent.subdomain!, "/live");
    const kept = await webSocket(server.edgePort, agent.subdomain!, "/other");
    await policyEndsOne(api, "no-live", { on_http_request: [{ expressions: ["req.url.path == '/live'"], actions: [{ type: "deny" }] }] }, refused, kept);
  }, 120_000);

  test("a sign-in added is checked on what each open pipe's upgrade carried: the one with the credentials goes on, the one without is closed", async () => {
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token });
    const signed = await webSocket(server.edgePort, agent.subdomain!, "/", { authorization: `Basic ${btoa("visitor:right-password")}` });
    const unsigned = await webSocket(server.edgePort, agent.subdomain!, "/");
    await policyEndsOne(api, "sign-in", { on_http_request: [{ actions: [{ type: "basic-auth", config: { credentials: ["visitor:right-password"] } }] }] }, unsigned, signed);
  }, 120_000);

  test("an upgrade let through before the change, whose 101 comes after the change was judged, meets the new layers at its 101", async () => {
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token });
    slowUpgrades = Promise.withResolvers<void>();
    slowAsked = Promise.withResolvers<void>();
    const edge = server.edgePort;
    const ws = new WebSocket(`ws://127.0.0.1:${edge}/slow`, { headers: { host: `${agent.subdomain}.localhost:${edge}` } } as any);
    const closed = new Promise<void>((resolve) => ws.addEventListener("close", () => resolve()));
    let id: number | undefined;
    try {
      // the upgrade passed the edge's judgement and waits at the service
      await slowAsked.promise;
      id = await addPolicy(api, "no-slow", { on_http_request: [{ expressions: ["req.url.path.startsWith('/slow')"], actions: [{ type: "deny" }] }] });
      // the change is in force at the edge (a new request meets it: one the service answers at once) before the 101 comes
      for (let i = 0; i < 500; i++) {
        const res = await fetch(`http://127.0.0.1:${edge}/slow-probe`, { headers: { host: `${agent.subdomain}.localhost:${edge}` } });
        await res.arrayBuffer();
        if (res.status === 403) break;
        await Bun.sleep(20);
      }
      slowUpgrades.resolve();
      expect(await endsWithin(closed, WITHIN_MS)).toBe(true);
    } finally {
      slowUpgrades.resolve();
      ws.close();
      if (id !== undefined) await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);

  test("a rate limit added is not counted again for the visits open: the requests after have the whole capacity", async () => {
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token });
    const ended = await webSocket(server.edgePort, agent.subdomain!, "/gone");
    const kept = await webSocket(server.edgePort, agent.subdomain!, "/kept");
    let id: number | undefined;
    try {
      // both open visits meet the limit first when judged again; the deny after it ends one, which shows they were judged
      id = await addPolicy(api, "limited", {
        on_http_request: [
          { actions: [{ type: "rate-limit", config: { name: "all", algorithm: "sliding_window", capacity: 3, rate: "60s" } }] },
          { expressions: ["req.url.path == '/gone'"], actions: [{ type: "deny" }] },
        ],
      });
      expect(await endsWithin(ended.closed, WITHIN_MS)).toBe(true);
      expect(await wsStillEchoes(kept.ws)).toBe(true);
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const res = await fetch(`http://127.0.0.1:${server.edgePort}/plain`, { headers: { host: `${agent.subdomain}.localhost:${server.edgePort}` } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      // the whole capacity for what comes: the open visits took none of it
      expect(statuses).toEqual([200, 200, 200, 429]);
    } finally {
      ended.ws.close();
      kept.ws.close();
      if (id !== undefined) await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);
});

describe("a narrowed traffic policy reaches what is already carried, over a cluster's nodes", () => {
  const SECRET = "live-visits-policy-secret-0123456789abcdef";
  let cluster: TwoNodes | undefined;
  let nodes: TestServer[] = [];
  let api: AdminClient;
  let token: string;

  beforeAll(async () => {
    cluster = await startTwoNodes({ ids: ["p1", "p2"], secret: SECRET });
    nodes = cluster.nodes;
    api = await signedIn(nodes[0]!);
    const userId = await api.createUser("clustered", { skip_warning: true });
    token = await api.createToken(userId);
  }, 90_000);
  afterAll(async () => {
    await cluster?.stop();
  });

  test("a WebSocket through one node to a tunnel on the other is closed by a policy made on the first; another goes on", async () => {
    // the tunnel is on the second node; the visitor reaches it through the first, which relays it
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "relayed-live"] });
    const refused = await webSocket(nodes[0]!.edgePort, agent.subdomain!, "/live");
    const kept = await webSocket(nodes[0]!.edgePort, agent.subdomain!, "/other");
    await policyEndsOne(api, "no-live-cluster", { on_http_request: [{ expressions: ["req.url.path == '/live'"], actions: [{ type: "deny" }] }] }, refused, kept);
  }, 120_000);
});

describe("a narrowed traffic policy reaches a tls tunnel's open connections", () => {
  let server: TestServer;
  let api: AdminClient;
  let token: string;
  let ca = "";
  let service: TCPSocketListener | undefined;

  beforeAll(async () => {
    // the local service is a TLS echo of its own: the edge passes its bytes through by the hello's name, undecrypted
    const cert = await selfSignedCertificate({ names: ["tlslive.localhost"], ca: true, commonName: "the local service" });
    ca = cert.certPem;
    service = Bun.listen({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, socket: { data: (s, d) => void s.write(d) } });
    server = await startServer({ args: ["--tls-port", "0"] });
    api = await signedIn(server);
    const userId = await api.createUser("carried-tls", { allowed_protocols: "http,tls" });
    token = await api.createToken(userId);
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    service?.stop(true);
  });

  test("a tls connection an operator's on_tcp_connect rule refuses now is closed; one it does not refuse goes on; a new one is refused", async () => {
    await using _agent = await startAgent({ kind: "tls", target: service!.port, server: server.edgeUrl, token, args: ["--subdomain", "tlslive"] });
    const tls = { name: "tlslive.localhost", ca };
    const refused = await heldOpen(server.tlsPort!, tls);
    const kept = await heldOpen(server.tlsPort!, tls);
    const ids: number[] = [];
    try {
      // the first alone (by its port): the second is judged by the same change and left open
      ids.push(await addPolicy(api, "one-tls-port", { on_tcp_connect: [{ expressions: [`conn.client_port == ${refused.socket.localPort}`], actions: [{ type: "deny" }] }] }));
      expect(await endsWithin(refused.closed, WITHIN_MS)).toBe(true);
      expect(await echoes(kept.socket)).toBe(true);
      // then the address: the open one goes too, and a new one is not carried
      ids.push(await addPolicy(api, "no-loopback-tls", { on_tcp_connect: [{ actions: [{ type: "restrict-ips", config: { deny: ["127.0.0.1/32", "::1/128"] } }] }] }));
      expect(await endsWithin(kept.closed, WITHIN_MS)).toBe(true);
      await expect(heldOpen(server.tlsPort!, tls)).rejects.toThrow();
    } finally {
      refused.socket.destroy();
      kept.socket.destroy();
      for (const id of ids) await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);
});
