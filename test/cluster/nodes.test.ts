/**
 * Three burrow nodes on one PostgreSQL database (Debian's, private, on
 * loopback): names are claimed cluster-wide, limits count every node,
 * /api/tunnels/active is the same on each, an admin action on one node
 * closes tunnels on another within a second, and a node killed with
 * SIGKILL lets go of its names within a few seconds. The cluster's limits
 * follow their flags: --node-expiry, --db-pool, --relay-lookups.
 */
import { SQL } from "bun";
import { rmSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startUdpEcho, udpClient } from "../harness/udp.ts";
import { NODE_EXPIRY_MS } from "../../src/cluster/cluster.ts";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { agentWebSocketPeer } from "../harness/agent-peer.ts";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let pg: TestPostgres;
let nodes: TestServer[] = [];
let api: AdminClient;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

const SECRET = "cluster-secret-for-tests-0123456789";
/**
 * A killed node's names are free once it has been silent NODE_EXPIRY_MS and a sweep (every 2 s)
 * has run: a generous margin for a loaded machine, far below the 60 s of grace that would hold
 * them were the node not found dead.
 */
const NAMES_FREED_MS = NODE_EXPIRY_MS + 2_000 + 8_000;

function startNode(url: string, id: string, more: string[] = []): Promise<TestServer> {
  return startServer({ args: ["--database", url, "--node-id", id, "--cluster-secret", SECRET, ...more] });
}

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  nodes = await Promise.all(["n1", "n2", "n3"].map((id) => startNode(url, id)));
  api = await signedIn(nodes[0]!);
});
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
});

const helloFor = (token: string, subdomain: string) =>
  jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http", subdomain }], agent: "cluster-test" });

async function userWithToken(name: string, extra: Record<string, unknown> = {}): Promise<{ id: number; token: string }> {
  const id = await api.createUser(name, extra);
  return { id, token: await api.createToken(id) };
}

async function activeOn(node: TestServer): Promise<string[]> {
  const client = new AdminClient(node.adminUrl);
  client.cookie = api.cookie;
  const list = (await client.get("/api/tunnels/active")).body as { subdomain?: string; port?: number }[];
  return list.map((t) => t.subdomain ?? `:${t.port}`).sort();
}

describe("names", () => {
  test("the same name asked of two nodes at the same moment: exactly one READY, the other SUBDOMAIN_TAKEN", async () => {
    const a = await userWithToken("race-a");
    const b = await userWithToken("race-b");
    for (let round = 0; round < 6; round++) {
      const name = `race-${round}`;
      const [ra, rb] = await Promise.all([
        sayHello({ port: nodes[0]!.edgePort, via: "websocket", payload: helloFor(a.token, name) }),
        sayHello({ port: nodes[1]!.edgePort, via: "websocket", payload: helloFor(b.token, name) }),
      ]);
      expect([ra.type, rb.type].sort()).toEqual(["ERROR", "READY"]);
      expect([ra, rb].find((r) => r.type === "ERROR")!.refusal!.code).toBe("SUBDOMAIN_TAKEN");
    }
  });

  test("a name live on one node is taken on the others, and free again on every node once its agent leaves", async () => {
    const owner = await userWithToken("owner");
    const other = await userWithToken("other");
    const agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: owner.token, args: ["--subdomain", "held"] });
    for (const n of [nodes[1]!, nodes[2]!]) {
      const r = await sayHello({ port: n.edgePort, via: "websocket", payload: helloFor(other.token, "held") });
      expect(r.refusal?.code).toBe("SUBDOMAIN_TAKEN");
    }
    expect(await agent.stop()).toBe(0); // Ctrl-C: the agent says goodbye, the name is free at once
    const r = await sayHello({ port: nodes[2]!.edgePort, via: "websocket", payload: helloFor(other.token, "held") });
    expect(r.type).toBe("READY");
  });
});

describe("nodes that cannot relay (no --node-url)", () => {
  test("a visitor on another node than the agent's gets 502 saying why, not the service and not a 500", async () => {
    const u = await userWithToken("not-relayed", { skip_warning: true });
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: u.token, args: ["--subdomain", "not-relayed", "--skip-warning"] });
    expect((await tunnelFetch(nodes[0]!.edgePort, "not-relayed", "/")).status).toBe(200);
    const elsewhere = await tunnelFetch(nodes[1]!.edgePort, "not-relayed", "/");
    expect(elsewhere.status).toBe(502);
    expect(await elsewhere.text()).toContain("which this node cannot reach");
  });
});

describe("limits and the live list count every node", () => {
  test("max_tunnels 1: a tunnel on n1, then a second asked of n2 is TUNNEL_LIMIT", async () => {
    const u = await userWithToken("one-tunnel", { max_tunnels: 1 });
    await using _first = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: u.token });
    const r = await sayHello({ port: nodes[1]!.edgePort, via: "websocket", payload: helloFor(u.token, "second-one") });
    expect(r.refusal?.code).toBe("TUNNEL_LIMIT");
  });

  test("max_tunnels 1, two HELLOs of the user at the same moment on two nodes: exactly one READY, the other TUNNEL_LIMIT", async () => {
    for (let round = 0; round < 3; round++) {
      const u = await userWithToken(`one-at-once-${round}`, { max_tunnels: 1 });
      // both stay connected while the other is judged (a peer that left would be in grace, not counted)
      const [p1, p2] = await Promise.all([
        agentWebSocketPeer(nodes[0]!.edgePort, [encodeFrame(FrameType.HELLO, 0, helloFor(u.token, `at-once-${round}-a`))], 1_000),
        agentWebSocketPeer(nodes[1]!.edgePort, [encodeFrame(FrameType.HELLO, 0, helloFor(u.token, `at-once-${round}-b`))], 1_000),
      ]);
      const answers = [p1, p2].map((p) => p.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR)!);
      expect(answers.map((f) => f.type).sort()).toEqual([FrameType.READY, FrameType.ERROR].sort());
      const refusal = answers.find((f) => f.type === FrameType.ERROR)!;
      expect(JSON.parse(new TextDecoder().decode(refusal.payload)).code).toBe("TUNNEL_LIMIT");
    }
  }, 20_000);

  test("max_devices 1: one token live on n1, another token of the user on n3 is DEVICE_LIMIT", async () => {
    const u = await userWithToken("one-device", { max_devices: 1 });
    const second = await api.createToken(u.id, "phone");
    await using _first = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: u.token });
    const r = await sayHello({ port: nodes[2]!.edgePort, via: "websocket", payload: helloFor(second, "other-device") });
    expect(r.refusal?.code).toBe("DEVICE_LIMIT");
  });

  test("/api/tunnels/active answers the same on every node: tunnels of all three", async () => {
    const u = await userWithToken("everywhere");
    await using _a = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: u.token, args: ["--subdomain", "on-n1"] });
    await using _b = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token: u.token, args: ["--subdomain", "on-n2"] });
    await using _c = await startAgent({ kind: "tcp", target: upstream.port!, server: nodes[2]!.edgeUrl, token: u.token });
    const lists = await Promise.all(nodes.map(activeOn));
    for (const list of lists) expect(list).toEqual(lists[0]!);
    expect(lists[0]).toEqual(expect.arrayContaining(["on-n1", "on-n2"]));
    expect(lists[0]!.some((n) => n.startsWith(":"))).toBe(true);
  });

  test("a udp tunnel is carried by the node that holds its port and listed by every node as udp, apart from a tcp tunnel on the same number", async () => {
    const u = await userWithToken("udp-on-n2", { allowed_protocols: "tcp,udp" });
    const echo = await startUdpEcho();
    await using tcp = await startAgent({ kind: "tcp", target: upstream.port!, server: nodes[1]!.edgeUrl, token: u.token });
    await using udp = await startAgent({ kind: "udp", target: echo.port, server: nodes[1]!.edgeUrl, token: u.token, args: ["--remote-port", String(tcp.port)] });
    const client = await udpClient(udp.port!);
    try {
      expect(udp.port).toBe(tcp.port!);
      client.send("via n2");
      expect((await client.waitFor(1))[0]!.toString()).toBe("via n2");
      for (const node of nodes) {
        const onNode = new AdminClient(node.adminUrl);
        onNode.cookie = api.cookie;
        const list = (await onNode.get("/api/tunnels/active")).body as { protocol: string; port?: number; username: string }[];
        const mine = list.filter((t) => t.username === "udp-on-n2").map((t) => `${t.protocol}:${t.port}`).sort();
        expect(mine).toEqual([`tcp:${tcp.port}`, `udp:${tcp.port}`]);
      }
    } finally {
      client.close();
      echo.close();
    }
  });
});

describe("admin actions reach every node", () => {
  test("revoking a token on n1 closes its tunnel on n3", async () => {
    const u = await userWithToken("revoked-elsewhere");
    const tokenId = ((await api.get(`/api/users/${u.id}/tokens`)).body as { id: number }[])[0]!.id;
    const agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[2]!.edgeUrl, token: u.token });
    try {
      expect((await api.delete(`/api/tokens/${tokenId}`)).status).toBe(200);
      // by NOTIFY, in a few ms; there is no slower path, so liveness is the test: 10 s leaves room for any loaded machine
      await agent.output.waitFor(/TOKEN_DISABLED/, 10_000);
      expect(await Promise.race([agent.proc.exited, Bun.sleep(10_000).then(() => "running")])).toBe(1);
    } finally {
      await agent.stop("SIGKILL");
    }
  });

  test("disabling a user on n2 closes their tunnels on n1 and n3", async () => {
    const u = await userWithToken("disabled-elsewhere");
    const a1 = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: u.token });
    const a3 = await startAgent({ kind: "http", target: upstream.port!, server: nodes[2]!.edgeUrl, token: u.token });
    try {
      const onN2 = new AdminClient(nodes[1]!.adminUrl);
      onN2.cookie = api.cookie;
      expect((await onN2.put(`/api/users/${u.id}`, { enabled: false })).status).toBe(200);
      await Promise.all([a1.output.waitFor(/USER_DISABLED/, 1_000), a3.output.waitFor(/USER_DISABLED/, 1_000)]);
    } finally {
      await Promise.all([a1.stop("SIGKILL"), a3.stop("SIGKILL")]);
    }
  });
});

describe("sign-in throttling counts every node", () => {
  test("5 wrong passwords for one username on n1: the next attempt on n2 is 429, even with no failure there", async () => {
    for (let i = 0; i < 5; i++) {
      const res = await new AdminClient(nodes[0]!.adminUrl).login("guessed-at", "wrong-password-1");
      expect(res.status).toBe(401);
    }
    // the failures reach n2 by NOTIFY, well within a second (measured: a few ms); one attempt there, after
    // a wait with room for a loaded machine (alone it would be its first failure, so it cannot be retried)
    await Bun.sleep(2_000);
    expect((await new AdminClient(nodes[1]!.adminUrl).login("guessed-at", "wrong-password-2")).status).toBe(429);
  });
});

describe("a node that dies", () => {
  test("killed with SIGKILL: its names are anyone's within a few seconds, and gone from the other nodes' lists", async () => {
    const url = await pg.newDatabase();
    const [x, y] = await Promise.all([startNode(url, "x"), startNode(url, "y")]);
    try {
      const admin = await signedIn(x);
      const first = await admin.createToken(await admin.createUser("on-doomed"));
      const second = await admin.createToken(await admin.createUser("after"));
      const r = await sayHello({ port: x.edgePort, via: "websocket", payload: helloFor(first, "doomed"), timeoutMs: 5_000 });
      expect(r.type).toBe("READY");
      // the raw peer left: the name waits 60 s in grace for its token, on a node about to die
      expect((await sayHello({ port: y.edgePort, via: "websocket", payload: helloFor(second, "doomed") })).refusal?.code).toBe("SUBDOMAIN_TAKEN");
      x.proc.kill("SIGKILL");
      await x.proc.exited;
      const killed = performance.now();
      let answer = "";
      for (let i = 0; i < 80 && answer !== "READY" && performance.now() - killed < NAMES_FREED_MS; i++) {
        await Bun.sleep(250); // between tries
        answer = (await sayHello({ port: y.edgePort, via: "websocket", payload: helloFor(second, "doomed") })).type;
      }
      expect(answer).toBe("READY");
      expect(performance.now() - killed).toBeLessThan(NAMES_FREED_MS);
    } finally {
      await Promise.all([x.stop(), y.stop()]);
    }
  }, 45_000);
});

describe("a node that restarts", () => {
  test("the names its agents had are held cluster-wide by its successor: another node refuses them to others until the agent is back", async () => {
    const url = await pg.newDatabase();
    const port = freeRange(1).first;
    const own = ["--http-port", String(port), "--agent-port", "off"];
    const [r1, r2] = await Promise.all([startServer({ keepDataDir: true, args: ["--database", url, "--node-id", "r1", "--cluster-secret", SECRET, ...own] }), startNode(url, "r2")]);
    let successor: TestServer | undefined;
    try {
      const admin = await signedIn(r1);
      const ownerId = await admin.createUser("comes-back");
      const owner = await admin.createToken(ownerId);
      const ownersOther = await admin.createToken(ownerId, "other device");
      const rival = await admin.createToken(await admin.createUser("rival"));
      expect((await admin.post("/api/hostnames", { hostname: "held.cluster.test", user_id: ownerId, verified: true })).status).toBe(201);
      await using agent = await startAgent({ kind: "http", target: upstream.port!, server: r1.edgeUrl, token: owner, args: ["--subdomain", "mine"] });
      // a tunnel known by its hostname alone is held as well
      await using byHostname = await startAgent({ kind: "http", target: upstream.port!, server: r1.edgeUrl, token: owner, args: ["--hostname", "held.cluster.test"] });
      // the agents cannot come back on their own yet: the hold is what keeps the names
      agent.proc.kill("SIGSTOP");
      byHostname.proc.kill("SIGSTOP");
      try {
        expect(await r1.stop("SIGTERM")).toBe(0);
        successor = await startServer({ dataDir: r1.dataDir, args: ["--database", url, "--node-id", "r1", "--cluster-secret", SECRET, ...own] });
        expect((await sayHello({ port: r2.edgePort, via: "websocket", payload: helloFor(rival, "mine") })).refusal?.code).toBe("SUBDOMAIN_TAKEN");
        const hostnameHello = jsonPayload({ version: PROTOCOL_VERSION, token: ownersOther, tunnels: [{ protocol: "http", hostname: "held.cluster.test" }], agent: "cluster-test" });
        expect((await sayHello({ port: r2.edgePort, via: "websocket", payload: hostnameHello })).refusal?.code).toBe("HOSTNAME_IN_USE");
      } finally {
        agent.proc.kill("SIGCONT");
        byHostname.proc.kill("SIGCONT");
      }
      // back on the successor, with its name
      let status = 0;
      for (let i = 0; i < 60 && status !== 200; i++) {
        await Bun.sleep(250);
        status = (await tunnelFetch(successor.edgePort, "mine", "/")).status;
      }
      expect(status).toBe(200);
    } finally {
      await Promise.all([r1.stop(), r2.stop(), successor?.stop()]);
      rmSync(r1.dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});

describe("a node taken for dead while alive", () => {
  test("claims its tunnels again at its next heartbeat, and lets go of one another node took meanwhile, telling its agent", async () => {
    const url = await pg.newDatabase();
    const [k1, k2] = await Promise.all([startNode(url, "k1"), startNode(url, "k2")]);
    const sql = new SQL(url, { max: 1 });
    try {
      const admin = await signedIn(k1);
      const owner = await admin.createUser("revenant");
      const other = await admin.createUser("usurper");
      const ownerToken = await admin.createToken(owner);
      await using kept = await startAgent({ kind: "http", target: upstream.port!, server: k1.edgeUrl, token: ownerToken, args: ["--subdomain", "kept", "--skip-warning"] });
      await using lost = await startAgent({ kind: "http", target: upstream.port!, server: k1.edgeUrl, token: ownerToken, args: ["--subdomain", "lost"] });
      // what another node's sweep does to a node whose heartbeat stopped (its tunnels go with it), and,
      // in the same transaction, another node claiming one of those names for another user
      await sql.begin(async (tx) => {
        await tx`DELETE FROM cluster_nodes WHERE id = 'k1'`;
        await tx`INSERT INTO live_tunnels (name, protocol, subdomain, node_id, session_id, user_id, username, token_id, connected_at)
                 SELECT 'http:lost', 'http', 'lost', 'k2', 'someone-else', id, username, ${0}, now()::text FROM users WHERE id = ${other}`;
      });
      const rowsOf = async () => Object.fromEntries((await sql`SELECT name, node_id FROM live_tunnels ORDER BY name`).map((r: { name: string; node_id: string }) => [r.name, r.node_id]));
      let rows: Record<string, string> = {};
      for (let i = 0; i < 20 && rows["http:kept"] !== "k1"; i++) {
        await Bun.sleep(250);
        rows = await rowsOf();
      }
      expect(rows).toEqual({ "http:kept": "k1", "http:lost": "k2" });
      await lost.output.waitFor(/SUBDOMAIN_TAKEN|taken by another node/, 5_000);
      // the kept tunnel serves on, on its own node
      const res = await tunnelFetch(k1.edgePort, "kept", "/");
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok");
      expect(kept.proc.exitCode).toBeNull();
    } finally {
      await sql.close();
      await Promise.all([k1.stop(), k2.stop()]);
    }
  }, 30_000);
});

describe("the cluster's limits, from their flags", () => {
  test("--node-expiry 10: a node silent for 8 s is still alive, and dead past 10 s", async () => {
    const url = await pg.newDatabase();
    const patient = await startNode(url, "patient", ["--node-expiry", "10"]);
    const sql = new SQL(url, { max: 1 });
    try {
      // a node whose last heartbeat was 5.5 s ago: past the default expiry of 5 s, within 10
      await sql`INSERT INTO cluster_nodes (id, url, started_at, heartbeat_ms) VALUES ('ghost', NULL, now()::text, (extract(epoch from clock_timestamp()) * 1000)::bigint - 5500)`;
      const ghost = async () => (await sql`SELECT count(*)::int AS n FROM cluster_nodes WHERE id = 'ghost'`)[0].n as number;
      await Bun.sleep(2_500); // a sweep (every 2 s) has run: the default expiry would have taken it
      expect(await ghost()).toBe(1);
      let left = 1;
      for (let i = 0; i < 40 && left > 0; i++) {
        await Bun.sleep(250);
        left = await ghost();
      }
      expect(left).toBe(0);
    } finally {
      await sql.close();
      await patient.stop();
    }
  }, 30_000);

  test("--db-pool 4: 60 admin requests at once are all answered on at most 4 pooled connections (and the one LISTEN holds)", async () => {
    const url = await pg.newDatabase();
    const small = await startNode(url, "small", ["--db-pool", "4"]);
    const sql = new SQL(url, { max: 1 });
    try {
      const admin = await signedIn(small);
      const statuses = await Promise.all(Array.from({ length: 60 }, () => admin.get("/api/users").then((r) => r.status)));
      expect(statuses.every((s) => s === 200)).toBe(true);
      const [row] = await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      // the default pool (10) takes 11 here
      expect(row.n).toBeGreaterThan(1);
      expect(row.n).toBeLessThanOrEqual(4 + 1);
    } finally {
      await sql.close();
      await small.stop();
    }
  }, 30_000);

  test("--relay-lookups 1: a flood of made-up names gets 503s past one lookup at once, the rest 404; a real name is served after", async () => {
    const url = await pg.newDatabase();
    const port = freeRange(1).first; // the holder's public port, known before it starts, so that it can say where it is
    const [holder, narrow] = await Promise.all([
      startNode(url, "holder", ["--http-port", String(port), "--node-url", `http://127.0.0.1:${port}`]),
      startNode(url, "narrow", ["--relay-lookups", "1"]),
    ]);
    try {
      const admin = await signedIn(holder);
      const owner = await admin.createToken(await admin.createUser("looked-up", { skip_warning: true }));
      await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: holder.edgeUrl, token: owner, args: ["--subdomain", "real-one", "--skip-warning"] });
      const answers = await Promise.all(Array.from({ length: 100 }, (_, i) => tunnelFetch(narrow.edgePort, `made-up-${i}`, "/").then(async (r) => ({ status: r.status, retry: r.headers.get("retry-after"), body: await r.text() }))));
      const busy = answers.filter((a) => a.status === 503);
      // the 100 arrive together: with one lookup at a time nearly all are turned away (the default, 64, would let most of them be looked up)
      expect(busy.length).toBeGreaterThan(50);
      expect(busy[0]!.retry).toBe("1");
      expect(busy[0]!.body).toContain("looking up too many tunnels at once");
      expect(answers.every((a) => a.status === 503 || a.status === 404)).toBe(true);
      expect(answers.some((a) => a.status === 404)).toBe(true);
      // no lookup is left counted: the real name, on the other node, is found and relayed
      const res = await tunnelFetch(narrow.edgePort, "real-one", "/");
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("ok");
    } finally {
      await Promise.all([holder.stop(), narrow.stop()]);
    }
  }, 30_000);
});
