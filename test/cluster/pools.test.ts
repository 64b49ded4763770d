/**
 * Pools over several nodes: members of one user's pool on different nodes
 * are one pool. A visitor's node spreads the pool's requests over its own
 * members and the others' (relayed); a node with none relays to all; the
 * name is refused to another user, and to an agent not asking to pool, on
 * every node; every node lists each member once; a member out of rotation
 * (its health check) gets nothing from any node; the last member's leaving
 * frees the name cluster-wide. A tcp pool is its node's, as its port is.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "pool-relay-secret-for-tests-0123456789";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let api: AdminClient;
let token: string;
let secondToken: string;
let strangerToken: string;
let tcpRange: { first: number; last: number };

/** A local service that says its name; /healthz answers 503 while `sick()`. */
function member(name: string, sick = () => false) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req) => (new URL(req.url).pathname === "/healthz" ? new Response(sick() ? "no" : "ok", { status: sick() ? 503 : 200 }) : new Response(name)),
  });
}
const a = member("a");
const b = member("b");

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(3);
  tcpRange = freeRange(3);
  nodes = await Promise.all(
    ["p1", "p2", "p3"].map((id, i) =>
      startServer({
        args: [
          ...["--database", url, "--node-id", id, "--http-port", String(ports.first + i)],
          ...["--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--tcp-ports", `${tcpRange.first}-${tcpRange.last}`],
        ],
      }),
    ),
  );
  api = await signedIn(nodes[0]!);
  const team = await api.createUser("team", { skip_warning: true });
  token = await api.createToken(team, "one");
  secondToken = await api.createToken(team, "two");
  strangerToken = await api.createToken(await api.createUser("stranger", { skip_warning: true }));
});
afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  for (const s of [a, b]) s.stop(true);
  await pg?.stop();
});

/** The answers to `n` requests to `name` through `node`, counted by what answered. */
async function spread(node: TestServer, name: string, n: number): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const res = await tunnelFetch(node.edgePort, name, "/");
    const text = res.status === 200 ? await res.text() : `${res.status} ${(await res.text()).replace(/<style[^]*?<\/style>/, "").replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").slice(0, 300)}`;
    counts[text] = (counts[text] ?? 0) + 1;
  }
  return counts;
}

/** Asks until `ok` holds of a spread of 10 (bounded: 10 s), and returns the last. */
async function spreadUntil(node: TestServer, name: string, ok: (c: Record<string, number>) => boolean): Promise<Record<string, number>> {
  const deadline = Date.now() + 10_000;
  let counts = await spread(node, name, 10);
  while (!ok(counts) && Date.now() < deadline) {
    await Bun.sleep(100);
    counts = await spread(node, name, 10);
  }
  return counts;
}

const pooled = (name: string, extra: string[] = []) => ["--subdomain", name, "--pool", "--skip-warning", ...extra];

describe("an http pool over several nodes", () => {
  test("members on two nodes are one pool: each node spreads 200 requests over both, a node with none relays to both", async () => {
    await using _a = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token, args: pooled("spread") });
    await using _b = await startAgent({ kind: "http", target: b.port!, server: nodes[1]!.edgeUrl, token: secondToken, args: pooled("spread") });
    for (const node of nodes) {
      // the others' members are learned in the background: the first answers may all be local
      await spreadUntil(node, "spread", (c) => c.a! > 0 && c.b! > 0);
      const counts = await spread(node, "spread", 200);
      expect(Object.keys(counts).sort()).toEqual(["a", "b"]);
      // a fair part each (round robin: 100 and 100, give or take what changes while it runs)
      expect(counts.a!).toBeGreaterThanOrEqual(80);
      expect(counts.b!).toBeGreaterThanOrEqual(80);
    }
  }, 60_000);

  test("another user's agent, and one of the same user not asking to pool, are refused the name on every node", async () => {
    await using _a = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token, args: pooled("owned") });
    for (const node of nodes) {
      expect(await refusal({ kind: "http", target: b.port!, server: node.edgeUrl, token: strangerToken, args: pooled("owned") })).toMatch(/SUBDOMAIN_TAKEN/);
      expect(await refusal({ kind: "http", target: b.port!, server: node.edgeUrl, token: secondToken, args: ["--subdomain", "owned"] })).toMatch(/SUBDOMAIN_TAKEN/);
    }
    // and a name held by a tunnel that is no pool is not joined by a pool from another node
    await using _plain = await startAgent({ kind: "http", target: a.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "plain", "--skip-warning"] });
    expect(await refusal({ kind: "http", target: b.port!, server: nodes[2]!.edgeUrl, token: secondToken, args: pooled("plain") })).toMatch(/SUBDOMAIN_TAKEN/);
  }, 60_000);

  test("every node lists each member once, as a pool member in rotation", async () => {
    await using _a = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token, args: pooled("listed") });
    await using _b = await startAgent({ kind: "http", target: b.port!, server: nodes[1]!.edgeUrl, token: secondToken, args: pooled("listed") });
    for (const node of nodes) {
      const client = await signedIn(node);
      const listed = async () => ((await client.get("/api/tunnels/active")).body as { subdomain?: string; pool?: boolean; in_rotation?: boolean }[]).filter((t) => t.subdomain === "listed");
      // a member comes in rotation once its agent has heard READY: another node's list says so a moment later
      const deadline = Date.now() + 5_000;
      let rows = await listed();
      while (rows.some((r) => !r.in_rotation) && Date.now() < deadline) {
        await Bun.sleep(50);
        rows = await listed();
      }
      expect(rows).toEqual([expect.objectContaining({ pool: true, in_rotation: true }), expect.objectContaining({ pool: true, in_rotation: true })]);
    }
  }, 60_000);

  test("a member out of rotation on its node gets nothing from any node, and its share again once back", async () => {
    let sick = false;
    const ailing = member("ailing", () => sick);
    try {
      await using _well = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token, args: pooled("health") });
      await using ill = await startAgent({ kind: "http", target: ailing.port!, server: nodes[1]!.edgeUrl, token: secondToken, args: pooled("health", ["--health-check", "/healthz", "--health-interval", "1"]) });
      for (const node of nodes) {
        await spreadUntil(node, "health", (c) => c.a! > 0 && c.ailing! > 0);
        expect(await spread(node, "health", 10)).toEqual({ a: 5, ailing: 5 });
      }
      sick = true;
      await ill.output.waitFor(/out of the pool's rotation/, 15_000);
      for (const node of nodes) expect(await spreadUntil(node, "health", (c) => !c.ailing)).toEqual({ a: 10 });
      sick = false;
      await ill.output.waitFor(/back in the pool's rotation/, 15_000);
      for (const node of nodes) {
        await spreadUntil(node, "health", (c) => c.a! > 0 && c.ailing! > 0);
        expect(await spread(node, "health", 10)).toEqual({ a: 5, ailing: 5 });
      }
    } finally {
      ailing.stop(true);
    }
  }, 90_000);

  test("a member leaving sends everything to the others; the last gone, another user takes the name on any node", async () => {
    const one = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token, args: pooled("leaving") });
    const two = await startAgent({ kind: "http", target: b.port!, server: nodes[1]!.edgeUrl, token: secondToken, args: pooled("leaving") });
    try {
      for (const node of nodes) await spreadUntil(node, "leaving", (c) => c.a! > 0 && c.b! > 0);
      expect(await one.stop()).toBe(0);
      for (const node of nodes) expect(await spreadUntil(node, "leaving", (c) => !c.a)).toEqual({ b: 10 });
      expect(await two.stop()).toBe(0);
      await using taker = await startAgent({ kind: "http", target: a.port!, server: nodes[2]!.edgeUrl, token: strangerToken, args: ["--subdomain", "leaving", "--skip-warning"] });
      for (const node of nodes) expect(await spreadUntil(node, "leaving", (c) => c.a === 10)).toEqual({ a: 10 });
    } finally {
      await one.stop();
      await two.stop();
    }
  }, 60_000);

  test("a rolling restart of members on two nodes under continuous load through every node: not one request fails", async () => {
    const start = (target: number, node: TestServer, t: string) => startAgent({ kind: "http", target, server: node.edgeUrl, token: t, args: pooled("rolling") });
    let one = await start(a.port!, nodes[0]!, token);
    let two = await start(b.port!, nodes[1]!, secondToken);
    for (const node of nodes) await spreadUntil(node, "rolling", (c) => c.a! > 0 && c.b! > 0);
    let sent = 0;
    const failures: string[] = [];
    let restarting = true;
    let phase = "first";
    // two clients on each node asking in a loop: 2,000 requests at least, 20,000 at most
    const load = Promise.all(
      [...nodes, ...nodes].map(async (node) => {
        while ((restarting || sent < 2000) && sent < 20_000) {
          sent++;
          try {
            const res = await tunnelFetch(node.edgePort, "rolling", "/");
            const text = await res.text();
            if (res.status !== 200 || (text !== "a" && text !== "b")) failures.push(`p${nodes.indexOf(node) + 1} ${phase} ${res.status} ${text.replace(/<style[^]*?<\/style>/, "").replace(/<[^>]*>/g, " ").replace(/\s+/g, " ").slice(0, 300)}`);
          } catch (err) {
            failures.push(String(err));
          }
        }
      }),
    );
    try {
      await Bun.sleep(300);
      phase = "stopping one";
      expect(await one.stop()).toBe(0);
      phase = "starting one";
      one = await start(a.port!, nodes[0]!, token);
      phase = "one started";
      await Bun.sleep(500);
      phase = "stopping two";
      expect(await two.stop()).toBe(0);
      phase = "starting two";
      two = await start(b.port!, nodes[1]!, secondToken);
      phase = "two started";
      await Bun.sleep(500);
    } finally {
      restarting = false;
      await load;
      await one.stop();
      await two.stop();
    }
    expect(failures).toEqual([]);
    expect(sent).toBeGreaterThanOrEqual(2000);
  }, 90_000);

  test("least-requests counts the requests other nodes relay: a member busy with them gets none of its own node's new ones", async () => {
    const slow = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: async () => (await Bun.sleep(5_000), new Response("slow")) });
    try {
      const args = pooled("least", ["--pool-balance", "least-requests"]);
      await using _fast = await startAgent({ kind: "http", target: a.port!, server: nodes[1]!.edgeUrl, token, args });
      await using _slow = await startAgent({ kind: "http", target: slow.port!, server: nodes[1]!.edgeUrl, token: secondToken, args });
      // four requests through p1, relayed to p2: the two the slow member takes stay in flight there
      expect((await tunnelFetch(nodes[0]!.edgePort, "least", "/")).status).toBe(200);
      const held = Promise.all(Array.from({ length: 4 }, async () => (await tunnelFetch(nodes[0]!.edgePort, "least", "/")).text()));
      await Bun.sleep(300);
      // meanwhile p2's own visitors all go to the member with none in flight
      const meanwhile: string[] = [];
      for (let i = 0; i < 6; i++) meanwhile.push(await (await tunnelFetch(nodes[1]!.edgePort, "least", "/")).text());
      expect(meanwhile).toEqual(Array(6).fill("a"));
      expect((await held).filter((x) => x === "slow").length).toBeGreaterThan(0);
    } finally {
      slow.stop(true);
    }
  }, 60_000);

  test("a custom hostname pools over the nodes too", async () => {
    const owner = await api.createUser("hostname-team", { skip_warning: true });
    expect((await api.post("/api/hostnames", { hostname: "pool.cluster.test", user_id: owner, verified: true })).status).toBe(201);
    const args = ["--hostname", "pool.cluster.test", "--pool", "--skip-warning"];
    await using _a = await startAgent({ kind: "http", target: a.port!, server: nodes[0]!.edgeUrl, token: await api.createToken(owner, "x"), args });
    await using _b = await startAgent({ kind: "http", target: b.port!, server: nodes[1]!.edgeUrl, token: await api.createToken(owner, "y"), args });
    for (const node of nodes) {
      const ask = async () => {
        const counts: Record<string, number> = {};
        for (let i = 0; i < 10; i++) {
          const res = await fetch(`http://127.0.0.1:${node.edgePort}/`, { headers: { host: `pool.cluster.test:${node.edgePort}` } });
          const text = await res.text();
          counts[text] = (counts[text] ?? 0) + 1;
        }
        return counts;
      };
      const deadline = Date.now() + 10_000;
      let counts = await ask();
      while (!(counts.a! > 0 && counts.b! > 0) && Date.now() < deadline) counts = await ask();
      expect(await ask()).toEqual({ a: 5, b: 5 });
    }
    expect(await refusal({ kind: "http", target: a.port!, server: nodes[2]!.edgeUrl, token: strangerToken, args: ["--hostname", "pool.cluster.test"] })).toMatch(/HOSTNAME_NOT_ALLOWED|HOSTNAME_IN_USE/);
  }, 60_000);
});

describe("a tcp pool on one of several nodes", () => {
  test("is its node's, as its port is: connections spread over its members there", async () => {
    const echo = (name: string) => Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.end(name), data() {} } });
    const one = echo("one");
    const two = echo("two");
    try {
      const port = tcpRange.first;
      await using _a = await startAgent({ kind: "tcp", target: one.port, server: nodes[0]!.edgeUrl, token, args: ["--remote-port", String(port), "--pool"] });
      await using _b = await startAgent({ kind: "tcp", target: two.port, server: nodes[0]!.edgeUrl, token: secondToken, args: ["--remote-port", String(port), "--pool"] });
      const said: string[] = [];
      for (let i = 0; i < 10; i++) {
        const { promise, resolve } = Promise.withResolvers<string>();
        let got = "";
        await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, d) => void (got += d.toString()), close: () => resolve(got), error: () => resolve(got) } });
        said.push(await promise);
      }
      expect(said.sort()).toEqual([...Array(5).fill("one"), ...Array(5).fill("two")]);
      // both members listed by every node, on that port
      for (const node of nodes) {
        const rows = ((await (await signedIn(node)).get("/api/tunnels/active")).body as { port?: number; pool?: boolean }[]).filter((t) => t.port === port);
        expect(rows).toEqual([expect.objectContaining({ pool: true }), expect.objectContaining({ pool: true })]);
      }
    } finally {
      one.stop(true);
      two.stop(true);
    }
  }, 60_000);
});
