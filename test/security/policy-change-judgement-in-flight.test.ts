/**
 * A judgement in flight when the traffic policies change: a visit whose
 * judgement waits (an action that fetches a key set, a rate-limit count
 * that answers late) was judged by the tunnel's layers as they were when it
 * began; a change made meanwhile is judged on what is already carried, but
 * this visit is not carried yet. When it comes to stay it is judged again
 * by the layers of now, and ended when they refuse it, whatever door it
 * came through (judgement/pipeline.ts hands forward the layers it began
 * with; traffic-policy/live-rejudge.ts judgedSince compares).
 *
 * The doors of streams relayed from another node, and a tcp tunnel's port,
 * are driven here in the process (cluster/relay.ts RelayIn, with two
 * in-memory mux links: the other node's and the agent's; tcp.ts's
 * listener on a real loopback port), their on_tcp_connect made to wait by a
 * rate-limit store that answers when the test lets it (the store may
 * answer late: its interface is asynchronous). The WebSocket's pipe on the
 * visitor's own node is driven end to end: a real server, agent and
 * service, the judgement held by a key-set server that answers when the
 * test lets it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { connect as tcpConnect } from "node:net";
import { RelayIn } from "../../src/cluster/relay.ts";
import { tcpHandlers } from "../../src/edge/tcp.ts";
import type { Registry, Tunnel } from "../../src/edge/registry.ts";
import { policiesChanged } from "../../src/edge/traffic-policy/live-rejudge.ts";
import { TunnelPolicy } from "../../src/edge/traffic-policy/tunnel-policy.ts";
import { defaultServices, loadPolicy, type Policy } from "../../src/policy/index.ts";
import type { RateLimitStore, RateLimitVerdict } from "../../src/policy/rate-limit-store.ts";
import { Mux, type Stream } from "../../src/protocol/mux.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { policyFile } from "../traffic-policy/rig.ts";
import { jwtValidation } from "../harness/jwt-policy.ts";

/** A liveness bound, far above what a loaded machine takes. */
const WITHIN_MS = 20_000;

/** A rate-limit store whose first count waits until `release`: the judgement that asks it is in flight meanwhile. */
class LateStore implements RateLimitStore {
  readonly asked = Promise.withResolvers<void>();
  readonly released = Promise.withResolvers<void>();
  hit(): Promise<RateLimitVerdict> {
    this.asked.resolve();
    return this.released.promise.then(() => ({ limited: false, retryAfterMs: 0, remaining: 99 }));
  }
}

function load(doc: unknown, store?: RateLimitStore): Policy {
  const p = loadPolicy(JSON.stringify(doc), { source: "test", services: defaultServices(store ? { rateLimits: store } : {}) });
  if (Array.isArray(p)) throw new Error(p[0]!.message);
  return p;
}

const COUNTED = { on_tcp_connect: [{ actions: [{ type: "rate-limit", config: { name: "conn", algorithm: "sliding_window", capacity: 100, rate: "60s", bucket_key: ["conn.client_ip"] } }] }] };
const DENY = { on_tcp_connect: [{ actions: [{ type: "deny" }] }] };
const LET_ON = { on_tcp_connect: [{ expressions: ["conn.client_ip == '192.0.2.1'"], actions: [{ type: "deny" }] }] };

/**
 * A node that has `t`, joined to the other node that relays to it: the
 * streams that node opens, the streams its agent is asked for.
 */
function relayedNode(t: Tunnel) {
  const timers: Mux[] = [];
  const toAgent: Stream[] = [];
  let agentSide: Mux;
  const agentLink = new Mux({ role: "edge", send: (m) => deliver(m, () => agentSide) });
  agentSide = new Mux({ role: "agent", send: (m) => deliver(m, () => agentLink), onStream: (s) => void toAgent.push(s) });
  (t as { agent?: unknown }).agent = { openStream: (meta: unknown) => agentLink.open(meta) };
  let relayIn: RelayIn;
  const otherNode = new Mux({ role: "edge", send: (m) => deliver(m, () => relayIn.mux) });
  relayIn = new RelayIn("node-a", (m) => deliver(m, () => otherNode), () => {}, { tunnelBySubdomain: () => t } as unknown as Registry);
  timers.push(agentLink, agentSide, otherNode, relayIn.mux);
  return {
    open: (meta: Record<string, unknown>) => otherNode.open({ tunnel: "held", remote: "127.0.0.1:40000", local: "127.0.0.1:443", client: "127.0.0.1", ...meta }),
    toAgent,
    close: () => {
      for (const m of timers) m.close();
    },
  };
}

/** Frames on their way, a macrotask later, as a socket's would come. */
function deliver(message: Uint8Array, to: () => Mux): "sent" {
  const copy = message.slice();
  setImmediate(() => to().receive(copy));
  return "sent";
}

function heldTunnel(protocol: "tcp" | "tls" | "http", own: Policy): Tunnel {
  return { id: 1, subdomain: "held", protocol, username: "u", relayed: false, policy: TunnelPolicy.of([], own), allowUpgrade: undefined, inFlight: 0 } as unknown as Tunnel;
}

/** Whether `s` is reset before the bound. */
async function resetWithin(s: Stream, ms = WITHIN_MS): Promise<boolean> {
  if (s.isClosed) return true;
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    return await Promise.race([new Promise<boolean>((resolve) => s.whenReset(() => resolve(true))), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}

/** Until the agent was asked for a stream (its visit carried): bounded in turns. */
async function carried(node: { toAgent: Stream[] }): Promise<void> {
  for (let turn = 0; turn < 100_000 && node.toAgent.length === 0; turn++) await new Promise((resolve) => setImmediate(resolve));
  expect(node.toAgent.length).toBe(1);
}

/**
 * A relayed visit through its door while its on_tcp_connect waits; the
 * operator's layer `operator` comes meanwhile, as setOperator puts it; then
 * its count answers. The stream the other node opened, once carried.
 */
async function judgedAcrossAChange(protocol: "tls" | "http", meta: Record<string, unknown>, operator: Policy) {
  const store = new LateStore();
  const t = heldTunnel(protocol, load(COUNTED, store));
  const node = relayedNode(t);
  const down = node.open(meta);
  await store.asked.promise;
  const before = t.policy;
  (t as { policy?: TunnelPolicy }).policy = TunnelPolicy.of([operator], before!.own);
  policiesChanged(t, before);
  store.released.resolve();
  await carried(node);
  return { down, node, t };
}

/** The same relayed visit judged across a deny (reset, nothing left live) and across a rule that lets it on (it stays, live). */
async function resetThenKept(protocol: "tls" | "http", meta: Record<string, unknown>): Promise<void> {
  const refused = await judgedAcrossAChange(protocol, meta, load(DENY));
  try {
    expect(await resetWithin(refused.down)).toBe(true);
    expect(refused.t.liveVisits?.size ?? 0).toBe(0);
  } finally {
    refused.node.close();
  }
  const kept = await judgedAcrossAChange(protocol, meta, load(LET_ON));
  try {
    expect(await resetWithin(kept.down, 500)).toBe(false);
    expect(kept.t.liveVisits?.size).toBe(1);
  } finally {
    kept.node.close();
  }
}

describe("a relayed visit judged while the operator's layers change is judged again by those of now when it stays", () => {
  test("relayed-tls: a tls connection whose on_tcp_connect waited across a deny is reset; across a rule that lets it on, it stays", async () => {
    await resetThenKept("tls", { kind: "tls" });
  }, 60_000);

  test("relayed-http with only on_tcp_connect rules: an upgrade whose connection's judgement waited across a deny is reset; across a rule that lets it on, it stays", async () => {
    const head = "GET /ws HTTP/1.1\r\nHost: held.localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    await resetThenKept("http", { kind: "h1", head });
  }, 60_000);
});

describe("a tcp tunnel's connection judged while the operator's layers change is judged again by those of now when it stays", () => {
  /** A connection to a tcp tunnel's port whose on_tcp_connect waits across `operator`'s coming: whether it closed once carried. */
  async function connectionAcrossAChange(operator: Policy): Promise<{ closedWithin: (ms: number) => Promise<boolean>; t: Tunnel } & Disposable> {
    const store = new LateStore();
    const t = heldTunnel("tcp", load(COUNTED, store));
    Object.assign(t, { countIn: () => {}, countOut: () => {} });
    const toAgent: Stream[] = [];
    let agentSide: Mux;
    const agentLink = new Mux({ role: "edge", send: (m) => deliver(m, () => agentSide) });
    agentSide = new Mux({ role: "agent", send: (m) => deliver(m, () => agentLink), onStream: (s) => void toAgent.push(s) });
    (t as { agent?: unknown }).agent = { openStream: (meta: unknown) => agentLink.open(meta) };
    const port = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: tcpHandlers(() => t) });
    const socket = tcpConnect(port.port, "127.0.0.1");
    socket.on("error", () => {});
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    const done = () => {
      socket.destroy();
      port.stop(true);
      agentLink.close();
      agentSide.close();
    };
    try {
      await store.asked.promise;
      const before = t.policy;
      (t as { policy?: TunnelPolicy }).policy = TunnelPolicy.of([operator], before!.own);
      policiesChanged(t, before);
      store.released.resolve();
      await carried({ toAgent });
    } catch (err) {
      done();
      throw err;
    }
    const closedWithin = async (ms: number) => {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const out = await Promise.race([closed.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms)))]);
      clearTimeout(timer);
      return out;
    };
    return { closedWithin, t, [Symbol.dispose]: done };
  }

  test("a connection whose on_tcp_connect waited across a deny is closed; across a rule that lets it on, it stays", async () => {
    {
      using refused = await connectionAcrossAChange(load(DENY));
      expect(await refused.closedWithin(WITHIN_MS)).toBe(true);
    }
    using kept = await connectionAcrossAChange(load(LET_ON));
    expect(await kept.closedWithin(500)).toBe(false);
    expect(kept.t.liveVisits?.size).toBe(1);
  }, 60_000);
});

describe("a WebSocket whose upgrade's judgement waited across a change meets the new layers when its pipe begins", () => {
  let server: TestServer;
  let api: AdminClient;
  let token: string;
  /** The key set's answers wait for this (a key-set server slow to answer): the upgrades' judgements are in flight meanwhile. */
  const keysAsked = Promise.withResolvers<void>();
  const keysReleased = Promise.withResolvers<void>();
  let keys: ReturnType<typeof Bun.serve>;
  let issuer = "";
  let signingKey: CryptoKey;
  const wsEcho = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("plain")),
    websocket: { message: (ws, m) => void ws.send(m) },
  });

  beforeAll(async () => {
    const pair = await generateKeyPair("RS256", { extractable: true });
    signingKey = pair.privateKey;
    const jwk = { ...(await exportJWK(pair.publicKey)), kid: "k1", alg: "RS256", use: "sig" };
    keys = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: async () => {
        keysAsked.resolve();
        await keysReleased.promise;
        return Response.json({ keys: [jwk] });
      },
    });
    issuer = `http://127.0.0.1:${keys.port}`;
    // the key server is plain http on loopback, which a server fetches only when told to
    server = await startServer({ args: ["--oidc-http-issuers", "loopback"] });
    api = await signedIn(server);
    const userId = await api.createUser("in-flight", { skip_warning: true });
    token = await api.createToken(userId);
  }, 60_000);
  afterAll(async () => {
    keysReleased.resolve();
    await server?.stop();
    keys?.stop(true);
    wsEcho.stop(true);
  });

  test("an upgrade whose jwt-validation waited for its key set while an operator's deny was added is cut at its 101; another, let on by the new layers, echoes", async () => {
    using file = policyFile(`
on_http_request:
  - actions:
${jwtValidation(issuer)}`);
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token, args: ["--policy-file", file.path] });
    const jwt = await new SignJWT({ sub: "visitor" }).setProtectedHeader({ alg: "RS256", kid: "k1" }).setIssuer(issuer).setAudience("urn:api").setIssuedAt().setExpirationTime("10m").sign(signingKey);
    const edge = server.edgePort;
    const host = `${agent.subdomain}.localhost:${edge}`;
    const open = (path: string) => {
      const ws = new WebSocket(`ws://127.0.0.1:${edge}${path}`, { headers: { host, authorization: `Bearer ${jwt}` } } as any);
      const closed = new Promise<void>((resolve) => ws.addEventListener("close", () => resolve()));
      const opened = new Promise<boolean>((resolve) => {
        ws.addEventListener("open", () => resolve(true));
        ws.addEventListener("close", () => resolve(false));
      });
      return { ws, closed, opened };
    };
    const refused = open("/held");
    const kept = open("/kept");
    let id: number | undefined;
    try {
      // both upgrades are in their judgement, waiting for the key set
      await keysAsked.promise;
      const made = await api.post("/api/policies", { name: "no-held", policy: { on_http_request: [{ expressions: ["req.url.path.startsWith('/held')"], actions: [{ type: "deny" }] }] } });
      expect(made.status).toBe(201);
      id = made.body.id;
      // the change is in force at the edge (a new request meets it) before the key set answers
      let status = 0;
      for (let i = 0; i < 500 && status !== 403; i++) {
        const res = await fetch(`http://127.0.0.1:${edge}/held-probe`, { headers: { host } });
        await res.arrayBuffer();
        status = res.status;
        if (status !== 403) await Bun.sleep(20);
      }
      expect(status).toBe(403);
      keysReleased.resolve();
      // the one the new layers let on opens and echoes: the token was good, and the pipes began
      expect(await kept.opened).toBe(true);
      const echoed = new Promise<string>((resolve) => kept.ws.addEventListener("message", (e) => resolve(String(e.data)), { once: true }));
      kept.ws.send("still here");
      expect(await echoed).toBe("still here");
      // the one they refuse is cut when it stays
      let timer: ReturnType<typeof setTimeout> | undefined;
      const ended = await Promise.race([refused.closed.then(() => true), new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), WITHIN_MS)))]);
      clearTimeout(timer);
      expect(ended).toBe(true);
      expect(kept.ws.readyState).toBe(WebSocket.OPEN);
    } finally {
      keysReleased.resolve();
      refused.ws.close();
      kept.ws.close();
      if (id !== undefined) await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);
});
