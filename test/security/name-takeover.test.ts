/**
 * Name takeover after a crash: a tunnel's name or port let go without a
 * goodbye (its agent killed -9, its connection dropped) is held for its
 * owner's token for the grace period (60 s), as documented. Many handshakes
 * racing for it during the grace, from other users and from the owner's
 * other tokens, on the WebSocket and the direct port, all get the refusal a
 * held name gives (SUBDOMAIN_TAKEN, HOSTNAME_IN_USE, PORT_UNAVAILABLE),
 * while the owner's own reconnect, racing them, gets it back; on several
 * nodes too, where the race is over the database.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { rawConnection, sayHello, type HelloAnswer, type RawConnection } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

/** Handshakes racing the owner for its name: each a connection of its own, all at once. */
const RIVALS = 24;
/** Liveness only: a handshake takes milliseconds; the grace (60 s) is far longer than a race. */
const WAIT_MS = 10_000;

type TunnelAsked = { protocol: "http" | "tls"; subdomain?: string; hostname?: string } | { protocol: "tcp" | "udp"; port?: number };

const helloPayload = (token: string, tunnel: TunnelAsked) => jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [tunnel], agent: "takeover-test" });

/** An owner's agent played by hand: HELLO, then READY's granted tunnel; the connection stays open until dropped. */
async function online(server: TestServer, token: string, tunnel: TunnelAsked, via: "websocket" | "direct" = "websocket"): Promise<{ conn: RawConnection; granted: { subdomain?: string; hostname?: string; port?: number } }> {
  const conn = await rawConnection({ port: via === "direct" ? server.agentPort! : server.edgePort, via });
  conn.send(encodeFrame(FrameType.HELLO, 0, helloPayload(token, tunnel)));
  const answered = () => conn.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR);
  await conn.until(() => answered() !== undefined || conn.closed, WAIT_MS);
  const answer = answered();
  if (answer?.type !== FrameType.READY) {
    conn.close();
    throw new Error(`the owner was not let back in: ${answer ? answer.payload.toString() : "no answer"}`);
  }
  return { conn, granted: JSON.parse(answer.payload.toString()).tunnels[0] };
}

/** The listed live tunnels' names and ports, as one admin client sees them. */
async function listed(api: AdminClient): Promise<string[]> {
  return ((await api.get("/api/tunnels/active")).body as { subdomain?: string; hostname?: string; port?: number }[]).flatMap((t) => [t.subdomain, t.hostname, t.port === undefined ? undefined : String(t.port)].filter((n): n is string => n !== undefined));
}

/** Drops the connection as a crash would (no GOAWAY), and waits until `api`'s node no longer lists `name`: it is in grace. */
async function dropWithoutGoodbye(conn: RawConnection, api: AdminClient, name: string): Promise<void> {
  conn.close();
  await waitUntil(async () => !(await listed(api)).includes(name), WAIT_MS, `${name} to leave the active list`);
}

/**
 * The race for a held name, in two waves of RIVALS handshakes for `tunnel`,
 * each from its own loopback address (no per-address cap stands in for the
 * rule), on the WebSocket and the direct port in turn, to each of `servers`
 * in turn: the first wave all at once while the owner is away, the second
 * with the owner's reconnect started in the middle of it. Rival i uses
 * rivalTokens[i % their number]. The answers of both waves, in order.
 */
async function race<T>(servers: TestServer[], rivalTokens: string[], tunnel: TunnelAsked, owner: () => Promise<T>): Promise<{ rivals: HelloAnswer[]; owner: T }> {
  const rival = (i: number, from: number) => {
    const server = servers[i % servers.length]!;
    const via = i % 4 < 2 ? "websocket" : "direct";
    const port = via === "direct" ? server.agentPort! : server.edgePort;
    return sayHello({ port, via, from: `127.0.0.${from}`, payload: helloPayload(rivalTokens[i % rivalTokens.length]!, tunnel), timeoutMs: WAIT_MS });
  };
  const away = await Promise.all(Array.from({ length: RIVALS }, (_, i) => rival(i, 20 + i)));
  const half = Math.floor(RIVALS / 2);
  const first = Array.from({ length: half }, (_, i) => rival(i, 100 + i));
  const mine = owner();
  const second = Array.from({ length: RIVALS - half }, (_, i) => rival(half + i, 100 + half + i));
  const [racing, ownerResult] = await Promise.all([Promise.all([...first, ...second]), mine]);
  return { rivals: [...away, ...racing], owner: ownerResult };
}

/** Every rival was refused, with one of `codes`; none was let in. */
function allRefused(rivals: HelloAnswer[], codes: string[]): void {
  expect(rivals.filter((r) => r.type !== "ERROR").map((r) => r.type)).toEqual([]);
  expect([...new Set(rivals.map((r) => r.refusal?.code))].filter((c) => !codes.includes(c!))).toEqual([]);
}

describe("name takeover after a crash, on one node", () => {
  let server: TestServer;
  let api: AdminClient;
  const owner = { id: 0, token: "", otherToken: "" };
  const strangers: string[] = [];
  const ownerWeb = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("the owner's service") });

  beforeAll(async () => {
    server = await startServer();
    api = await signedIn(server);
    owner.id = await api.createUser("owner", { allowed_protocols: "http,tcp,udp,tls", skip_warning: true });
    owner.token = await api.createToken(owner.id, "laptop");
    owner.otherToken = await api.createToken(owner.id, "desktop");
    for (const name of ["mallory", "trudy", "eve"]) strangers.push(await api.createToken(await api.createUser(name, { allowed_protocols: "http,tcp,udp,tls" })));
    expect((await api.post("/api/hostnames", { hostname: "held.takeover.test", user_id: owner.id, verified: true })).status).toBe(201);
  });
  afterAll(async () => {
    await server?.stop();
    ownerWeb.stop(true);
  });

  test("name takeover after a crash: an agent killed -9 keeps its subdomain; racing handshakes of other users and of the owner's other token all get SUBDOMAIN_TAKEN, the owner's restarted agent gets it back", async () => {
    const first = await startAgent({ kind: "http", target: ownerWeb.port!, server: server.edgeUrl, token: owner.token, args: ["--subdomain", "crashed", "--skip-warning"] });
    await first.stop("SIGKILL");
    await waitUntil(async () => !(await listed(api)).includes("crashed"), WAIT_MS, "the killed agent's tunnel to leave the active list");

    const { rivals, owner: back } = await race([server], [...strangers, owner.otherToken], { protocol: "http", subdomain: "crashed" }, () =>
      startAgent({ kind: "http", target: ownerWeb.port!, server: server.edgeUrl, token: owner.token, args: ["--subdomain", "crashed", "--skip-warning"] }),
    );
    await using _back = back;
    allRefused(rivals, ["SUBDOMAIN_TAKEN"]);
    expect(back.subdomain).toBe("crashed");
    expect(await (await tunnelFetch(server.edgePort, "crashed", "/")).text()).toBe("the owner's service");
    expect((await listed(api)).filter((n) => n === "crashed")).toHaveLength(1);
  });

  test("name takeover after a crash: a dropped connection's subdomain, raced for on both transports, comes back to the owner only", async () => {
    const { conn } = await online(server, owner.token, { protocol: "http", subdomain: "dropped" }, "direct");
    await dropWithoutGoodbye(conn, api, "dropped");
    const { rivals, owner: back } = await race([server], strangers, { protocol: "http", subdomain: "dropped" }, () => online(server, owner.token, { protocol: "http", subdomain: "dropped" }));
    try {
      allRefused(rivals, ["SUBDOMAIN_TAKEN"]);
      expect(back.granted.subdomain).toBe("dropped");
      // once it is back, it is live: the next wave is refused the same way
      allRefused(await Promise.all(strangers.map((t, i) => sayHello({ port: server.edgePort, via: "websocket", from: `127.0.0.${60 + i}`, payload: helloPayload(t, { protocol: "http", subdomain: "dropped" }) }))), ["SUBDOMAIN_TAKEN"]);
    } finally {
      back.conn.close();
    }
  });

  test("name takeover after a crash: a custom hostname is held for the token: the owner's other token gets HOSTNAME_IN_USE, other users HOSTNAME_NOT_ALLOWED, the owner gets it back", async () => {
    const tunnel = { protocol: "http", hostname: "held.takeover.test" } as const;
    const { conn } = await online(server, owner.token, tunnel);
    await dropWithoutGoodbye(conn, api, "held.takeover.test");
    const { rivals, owner: back } = await race([server], [owner.otherToken, ...strangers], tunnel, () => online(server, owner.token, tunnel, "direct"));
    try {
      allRefused(rivals, ["HOSTNAME_IN_USE", "HOSTNAME_NOT_ALLOWED"]);
      // the owner's other token passes the hostname's rule: only the grace stops it
      expect(rivals.filter((_, i) => i % 4 === 0).map((r) => r.refusal?.code)).toEqual(Array(RIVALS / 2).fill("HOSTNAME_IN_USE"));
      expect(back.granted.hostname).toBe("held.takeover.test");
    } finally {
      back.conn.close();
    }
  });

  for (const protocol of ["tcp", "udp"] as const) {
    test(`name takeover after a crash: a ${protocol} port is held: racing handshakes for it get PORT_UNAVAILABLE, the owner gets the same port back`, async () => {
      const { conn, granted } = await online(server, owner.token, { protocol });
      const port = granted.port!;
      await dropWithoutGoodbye(conn, api, String(port));
      const { rivals, owner: back } = await race([server], [...strangers, owner.otherToken], { protocol, port }, () => online(server, owner.token, { protocol, port }));
      try {
        allRefused(rivals, ["PORT_UNAVAILABLE"]);
        expect(back.granted.port).toBe(port);
      } finally {
        back.conn.close();
      }
    });
  }
});

describe("name takeover after a crash, on several nodes (one PostgreSQL)", () => {
  let pg: TestPostgres;
  let nodes: TestServer[] = [];
  let apis: AdminClient[] = [];
  const owner = { id: 0, token: "", otherToken: "" };
  const strangers: string[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.newDatabase();
    nodes = await Promise.all(["n1", "n2"].map((id) => startServer({ args: ["--database", url, "--node-id", id] })));
    apis = await Promise.all(nodes.map((n) => signedIn(n)));
    const api = apis[0]!;
    owner.id = await api.createUser("owner");
    owner.token = await api.createToken(owner.id, "laptop");
    owner.otherToken = await api.createToken(owner.id, "desktop");
    for (const name of ["mallory", "trudy"]) strangers.push(await api.createToken(await api.createUser(name)));
    expect((await api.post("/api/hostnames", { hostname: "held.cluster-takeover.test", user_id: owner.id, verified: true })).status).toBe(201);
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await pg?.stop();
  });

  for (const [name, tunnel] of [
    ["nodecrash", { protocol: "http", subdomain: "nodecrash" }],
    ["held.cluster-takeover.test", { protocol: "http", hostname: "held.cluster-takeover.test" }],
  ] as const) {
    test(`name takeover after a crash: ${name} dropped on one node, raced for on both: every rival refused, the owner gets it back on the other node`, async () => {
      const { conn } = await online(nodes[0]!, owner.token, tunnel);
      // the other node sees it go (its row lost its session): held, in the database, for the token
      await dropWithoutGoodbye(conn, apis[1]!, name);
      const { rivals, owner: back } = await race(nodes, [...strangers, owner.otherToken], tunnel, () => online(nodes[1]!, owner.token, tunnel));
      try {
        allRefused(rivals, ["SUBDOMAIN_TAKEN", "HOSTNAME_IN_USE", "HOSTNAME_NOT_ALLOWED"]);
        expect(back.granted).toMatchObject("subdomain" in tunnel ? { subdomain: name } : { hostname: name });
        // one tunnel of that name over the cluster, the owner's, seen alike from both nodes
        for (const api of apis) await waitUntil(async () => (await listed(api)).filter((n) => n === name).length === 1, WAIT_MS, `${name} listed once`);
      } finally {
        back.conn.close();
      }
    });
  }
});
