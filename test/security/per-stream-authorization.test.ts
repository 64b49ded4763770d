/**
 * Per-stream authorization (the class of chisel's GHSA-24fp: access checked
 * once, at the handshake): each connection a `burrow connect` connector
 * opens, and each stream one node relays to another, is judged by the rules
 * as they are now, where the private tunnel is, not as they were when the
 * connector's session began. A connector connected while allowed is
 * refused its next connection once it is not, even while its session is
 * up and even when no node was told of the change (written to the database
 * behind the servers' backs), within 5 s.
 */
import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { RelayOut } from "../../src/cluster/relay.ts";
import { privateRowName } from "../../src/edge/private-streams.ts";
import type { Mux } from "../../src/protocol/mux.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { echoThrough, startConnector, type TestConnector } from "../harness/connector.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/** What is promised: a change reaches the next stream within this, told or not. */
const LIVE_EFFECT_MS = 5_000;
/** How long a test tries at most before it says what it saw (a liveness bound, above the promise). */
const WAIT_MS = 20_000;

const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const connectors: TestConnector[] = [];
afterAll(async () => {
  for (const c of connectors) await c[Symbol.asyncDispose]();
  echo.stop(true);
});

function connector(server: TestServer, token: string, target: string): TestConnector {
  const c = startConnector({ server: server.edgeUrl, token, target });
  connectors.push(c);
  return c;
}

/**
 * How long after `since` a connection through the connector's local port
 * stopped being echoed (tried every 100 ms), and that its session had not
 * ended before the refused connection.
 */
async function refusedAfter(c: TestConnector, port: number, since: number): Promise<number> {
  for (;;) {
    expect(c.proc.exitCode).toBeNull(); // the session is up: the refusal is the stream's
    if ((await echoThrough(port, "ping").catch(() => "")) !== "ping") return performance.now() - since;
    if (performance.now() - since > WAIT_MS) throw new Error(`still echoed ${WAIT_MS} ms after the change`);
    await Bun.sleep(100);
  }
}

describe("a connector's connections on one node", () => {
  let server: TestServer;
  let api: AdminClient;
  let db: Database;
  let n = 0;

  beforeAll(async () => {
    server = await startServer();
    api = await signedIn(server);
    db = new Database(join(server.dataDir, "burrow.db"));
  });
  afterAll(async () => {
    db?.close();
    await server?.stop();
  });

  async function pair() {
    const alice = await api.createUser(`owner${++n}`);
    const bob = await api.createUser(`peer${n}`);
    const bobToken = await api.post(`/api/users/${bob}/tokens`, { device_name: "laptop" });
    const owner = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: await api.createToken(alice), args: ["--private", "--name", "db", "--share", `peer${n}`] });
    const c = connector(server, bobToken.body.token, `owner${n}/db`);
    const port = await c.port();
    expect(await echoThrough(port, "allowed")).toBe("allowed");
    return { alice, bob, bobTokenId: bobToken.body.token_id as number, owner, c, port };
  }

  test("the share removed behind the server's back: the next connection is refused while the session is up, and the connector is told NOT_SHARED", async () => {
    const { alice, owner, c, port } = await pair();
    await using _owner = owner;
    const t0 = performance.now();
    db.run("UPDATE private_names SET shares = '[]' WHERE owner_id = ? AND name = 'db'", [alice]);
    expect(await refusedAfter(c, port, t0)).toBeLessThan(LIVE_EFFECT_MS);
    await c.output.waitFor(/refused: NOT_SHARED: \S/, WAIT_MS);
    expect(await c.proc.exited).toBe(1);
  }, 60_000);

  test("the connector's token revoked behind the server's back: the next connection is refused, and the connector is told TOKEN_DISABLED", async () => {
    const { bobTokenId, owner, c, port } = await pair();
    await using _owner = owner;
    const t0 = performance.now();
    db.run("UPDATE tokens SET enabled = 0 WHERE id = ?", [bobTokenId]);
    expect(await refusedAfter(c, port, t0)).toBeLessThan(LIVE_EFFECT_MS);
    await c.output.waitFor(/refused: TOKEN_DISABLED: \S/, WAIT_MS);
    expect(await c.proc.exited).toBe(1);
  }, 60_000);
});

describe("streams relayed between two nodes on PostgreSQL", () => {
  const SECRET = "per-stream-authorization-secret-0123456789";
  let pg: TestPostgres;
  let sql: SQL;
  let nodes: TestServer[] = [];
  let api: AdminClient;
  let owner: TestAgent;
  let aliceId: number;
  const users: Record<string, { id: number; token: string; tokenId: number }> = {};
  const relay = new RelayOut("a-node-of-the-test", SECRET);
  let link: Mux;

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.newDatabase();
    sql = new SQL(url);
    const ports = freeRange(2);
    nodes = await Promise.all(
      ["p1", "p2"].map((id, i) =>
        startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET] }),
      ),
    );
    api = await signedIn(nodes[0]!);
    aliceId = await api.createUser("alice");
    for (const name of ["bob", "carol", "dave", "erin", "frank", "grace"]) {
      const id = await api.createUser(name);
      const res = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
      users[name] = { id, token: res.body.token, tokenId: res.body.token_id };
    }
    owner = await startAgent({ kind: "tcp", target: echo.port, server: nodes[0]!.edgeUrl, token: await api.createToken(aliceId), args: ["--private", "--name", "db", "--share", Object.keys(users).join(",")] });
    // the test opens relay streams as a node of the cluster would, with the cluster's secret
    link = (await relay.link("p1", `http://127.0.0.1:${ports.first}`))!;
    expect(link).toBeDefined();
  }, 90_000);
  afterAll(async () => {
    relay.close();
    await owner?.stop();
    await Promise.all(nodes.map((node) => node.stop()));
    await sql?.close();
    await pg?.stop();
  });

  /** A stream to alice/db as the node of `who`'s connector would relay it: "echoed", or "reset <code>". */
  function relayedStream(who: string): Promise<string> {
    const u = users[who]!;
    const s = link.open({ tunnel: privateRowName(aliceId, "db"), kind: "tcp", remote: "127.0.0.1:9", connector: { id: u.id, username: who, token: u.tokenId } });
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve("nothing"), 10_000);
      const done = (what: string) => {
        clearTimeout(timer);
        resolve(what);
      };
      let got = "";
      s.onData = (d) => {
        got += new TextDecoder().decode(d);
        s.consumed(d.byteLength);
        if (got === "ping") {
          done("echoed");
          s.reset();
        }
      };
      s.whenReset((code) => done(`reset ${code}`));
      s.write(new TextEncoder().encode("ping"));
    });
  }

  /** How long after `since` `who`'s relayed streams were reset with `code` (tried every 100 ms). */
  async function refusedWith(who: string, code: string, since: number): Promise<number> {
    for (;;) {
      const got = await relayedStream(who);
      if (got === `reset ${code}`) return performance.now() - since;
      expect(got).toBe("echoed");
      if (performance.now() - since > WAIT_MS) throw new Error(`${who}'s streams still joined ${WAIT_MS} ms after the change`);
      await Bun.sleep(100);
    }
  }

  test("each relayed stream is judged where the tunnel is, by the rules now: joined while the connector may, refused with the handshake's code once it may not", async () => {
    for (const who of ["carol", "dave", "erin", "frank"]) expect(await relayedStream(who)).toBe("echoed");

    let t0 = performance.now();
    await api.delete(`/api/tokens/${users.carol!.tokenId}`);
    expect(await refusedWith("carol", "TOKEN_DISABLED", t0)).toBeLessThan(LIVE_EFFECT_MS);

    t0 = performance.now();
    await api.put(`/api/users/${users.dave!.id}`, { enabled: false });
    expect(await refusedWith("dave", "USER_DISABLED", t0)).toBeLessThan(LIVE_EFFECT_MS);

    t0 = performance.now();
    await api.put(`/api/users/${users.erin!.id}`, { allowed_protocols: "http" });
    expect(await refusedWith("erin", "PROTOCOL_DENIED", t0)).toBeLessThan(LIVE_EFFECT_MS);

    // made on the other node: the owner's node hears of it
    t0 = performance.now();
    await (await signedIn(nodes[1]!)).put(`/api/users/${users.frank!.id}`, { allowed_protocols: "http" });
    expect(await refusedWith("frank", "PROTOCOL_DENIED", t0)).toBeLessThan(LIVE_EFFECT_MS);
  }, 60_000);

  test("a connector on the other node: the share removed behind both nodes' backs refuses its next connection while its session is up, and it is told NOT_SHARED", async () => {
    const bob = connector(nodes[1]!, users.bob!.token, "alice/db");
    const port = await bob.port();
    expect(await echoThrough(port, "relayed")).toBe("relayed");
    expect(await relayedStream("grace")).toBe("echoed");

    const t0 = performance.now();
    // no admin API, no NOTIFY: only the database knows
    await sql`UPDATE private_names SET shares = ${JSON.stringify([users.grace!.id])} WHERE owner_id = ${aliceId} AND name = 'db'`;
    expect(await refusedAfter(bob, port, t0)).toBeLessThan(LIVE_EFFECT_MS);
    await bob.output.waitFor(/refused: NOT_SHARED: \S/, WAIT_MS);
    expect(await bob.proc.exited).toBe(1);
    // a stream claimed for bob by a node is refused where the tunnel is; grace's still joined
    expect(await relayedStream("bob")).toBe("reset NOT_SHARED");
    expect(await relayedStream("grace")).toBe("echoed");

    // the owner's can_share turned off: nobody but the owner reaches it, relayed or not
    const t1 = performance.now();
    await api.put(`/api/users/${aliceId}`, { can_share: false });
    expect(await refusedWith("grace", "NOT_SHARED", t1)).toBeLessThan(LIVE_EFFECT_MS);
  }, 60_000);
});
