/**
 * Wildcard takeover of another user's hostname: a wildcard never covers a
 * name another user holds, verified or pending, and an exact registration
 * beats a wildcard. Registering a name or wildcard that overlaps another
 * user's is 409 HOSTNAME_OVERLAP naming the other hostname, on one node and
 * under a race between two nodes (PostgreSQL); rows that overlap from
 * before the rule are settled at the handshake: the wildcard's owner is
 * refused the other user's name (HOSTNAME_NOT_ALLOWED, without saying who
 * holds it), on every way a HELLO asks for it, and the other user's
 * visitors never reach the wildcard's owner.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let db: Database;
const alice = { id: 0, token: "" };
const bob = { id: 0, token: "" };
const aliceWeb = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("alice's service") });
const bobWeb = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("bob's service") });

/** A request to the edge with `host` as its Host. */
const visit = (host: string) => fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `${host}:${server.edgePort}` }, redirect: "manual" });
const tunnel = (token: string, port: number, hostname: string) => ({ kind: "http" as const, target: port, server: server.edgeUrl, token, args: ["--hostname", hostname, "--skip-warning"] });

/** Hostname rows as an older burrow could have left them (no overlap check), written straight into the database. */
function legacyRows(rows: [hostname: string, userId: number, verified: boolean][]): void {
  const insert = db.prepare("INSERT INTO custom_hostnames (hostname, user_id, verified, token, created_at, verified_at) VALUES (?, ?, ?, 'legacy', '2026-01-01T00:00:00.000Z', ?)");
  for (const [hostname, userId, verified] of rows) insert.run(hostname, userId, verified ? 1 : 0, verified ? "2026-01-01T00:00:00.000Z" : null);
}

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  db = new Database(join(server.dataDir, "burrow.db"));
  db.exec("PRAGMA busy_timeout = 5000");
  for (const [who, name] of [[alice, "alice"], [bob, "bob"]] as const) {
    who.id = await api.createUser(name, { skip_warning: true, allowed_protocols: "http,tls" });
    who.token = await api.createToken(who.id);
  }
});
afterAll(async () => {
  db?.close();
  await server?.stop();
  aliceWeb.stop(true);
  bobWeb.stop(true);
});

describe("wildcard takeover: registering an overlap is 409 HOSTNAME_OVERLAP naming the conflict", () => {
  test("alice's demo.acme.test (verified) and pending.acme.test (pending), then bob's *.acme.test: 409, and bob holds nothing", async () => {
    expect((await api.post("/api/hostnames", { hostname: "demo.acme.test", user_id: alice.id, verified: true })).status).toBe(201);
    expect((await api.post("/api/hostnames", { hostname: "pending.acme.test", user_id: alice.id })).status).toBe(201);
    const res = await api.post("/api/hostnames", { hostname: "*.acme.test", user_id: bob.id, verified: true });
    expect(res.status).toBe(409);
    expect(res.body.error).toMatch(/^hostname '\*\.acme\.test' overlaps '(demo|pending)\.acme\.test', registered to user 'alice'/);
    expect((await api.get(`/api/hostnames?user_id=${bob.id}`)).body).toEqual([]);
    // the audit log has the refusal, with its code, like any failed write
    const audit = (await api.get("/api/audit?action=hostname.create")).body as { outcome: string; code: string | null; details: { hostname?: string } }[];
    expect(audit.find((e) => e.code === "HOSTNAME_OVERLAP")).toMatchObject({ outcome: "failed", details: { hostname: "*.acme.test" } });
  });

  test("a name under another user's wildcard is 409 too; a name two labels under it, and the same user's own names, are not", async () => {
    expect((await api.post("/api/hostnames", { hostname: "*.shop.test", user_id: bob.id, verified: true })).status).toBe(201);
    const res = await api.post("/api/hostnames", { hostname: "cart.shop.test", user_id: alice.id, verified: true });
    expect(res.status).toBe(409);
    expect(res.body.error).toContain("overlaps '*.shop.test', registered to user 'bob'");
    expect((await api.post("/api/hostnames", { hostname: "a.cart.shop.test", user_id: alice.id, verified: true })).status).toBe(201);
    expect((await api.post("/api/hostnames", { hostname: "cart.shop.test", user_id: bob.id, verified: true })).status).toBe(201);
  });
});

describe("wildcard takeover: overlapping rows from before the rule", () => {
  beforeAll(() => {
    // as an older burrow let them be: bob's wildcard over alice's names
    legacyRows([
      ["demo.old.test", alice.id, true],
      ["pending.old.test", alice.id, false],
      ["*.old.test", bob.id, true],
    ]);
  });

  test("bob's tunnel asking for alice's verified or pending name is refused HOSTNAME_NOT_ALLOWED, without naming alice", async () => {
    for (const name of ["demo.old.test", "pending.old.test"]) {
      const said = await refusal(tunnel(bob.token, bobWeb.port!, name));
      expect(said).toMatch(new RegExp(`^burrow: refused by the server: HOSTNAME_NOT_ALLOWED: '${name.replaceAll(".", "\\.")}' is registered to another user`));
      expect(said).not.toContain("alice");
    }
  });

  test("alice's visitors never reach bob: with her tunnel up they reach her, with it down they get the unknown name's 404", async () => {
    expect((await visit("demo.old.test")).status).toBe(404);
    {
      await using _alice = await startAgent(tunnel(alice.token, aliceWeb.port!, "demo.old.test"));
      expect(await (await visit("demo.old.test")).text()).toBe("alice's service");
      expect(await refusal(tunnel(bob.token, bobWeb.port!, "demo.old.test"))).toMatch(/HOSTNAME_NOT_ALLOWED/);
      expect(await (await visit("demo.old.test")).text()).toBe("alice's service");
    }
    const after = await visit("demo.old.test");
    expect(after.status).toBe(404);
    expect(await after.text()).not.toContain("bob's service");
  });

  test("every way a HELLO names it is refused: a tls tunnel, and one tunnel of a partial HELLO (the others granted)", async () => {
    const tls = await sayHello({ port: server.edgePort, via: "websocket", payload: jsonPayload({ version: PROTOCOL_VERSION, token: bob.token, tunnels: [{ protocol: "tls", hostname: "demo.old.test" }] }) });
    expect(tls.refusal?.code).toBe("HOSTNAME_NOT_ALLOWED");
    const partial = await sayHello({
      port: server.edgePort,
      via: "websocket",
      payload: jsonPayload({
        version: PROTOCOL_VERSION,
        token: bob.token,
        partial: true,
        tunnels: [
          { protocol: "http", hostname: "pending.old.test" },
          { protocol: "http", hostname: "Other.Old.Test." },
        ],
      }),
    });
    expect(partial.type).toBe("READY");
    expect(partial.ready.refused).toEqual([{ index: 0, code: "HOSTNAME_NOT_ALLOWED", message: expect.stringContaining("registered to another user") }]);
    expect(partial.ready.tunnels.map((t: { hostname?: string }) => t.hostname)).toEqual(["other.old.test"]);
  });

  test("the rest of bob's wildcard is still his: another name under it goes live and serves bob", async () => {
    await using _bob = await startAgent(tunnel(bob.token, bobWeb.port!, "mine.old.test"));
    expect(await (await visit("mine.old.test")).text()).toBe("bob's service");
  });
});

describe("wildcard takeover under a race: two nodes on one PostgreSQL register overlapping names at the same moment", () => {
  let pg: TestPostgres;
  let nodes: TestServer[] = [];
  let clients: AdminClient[] = [];
  const users = { a: 0, b: 0 };

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.newDatabase();
    nodes = await Promise.all(["n1", "n2"].map((id) => startServer({ args: ["--database", url, "--node-id", id] })));
    clients = await Promise.all(nodes.map((n) => signedIn(n)));
    users.a = await clients[0]!.createUser("race-alice");
    users.b = await clients[0]!.createUser("race-bob");
  });
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await pg?.stop();
  });

  const ROUNDS = 12;

  test("a name and a wildcard over it, by two users on two nodes at once: one 201, the other 409 HOSTNAME_OVERLAP, every round", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const base = `r${round}.race.test`;
      // alternate which node gets which, so neither always starts first
      const [c1, c2] = round % 2 === 0 ? [clients[0]!, clients[1]!] : [clients[1]!, clients[0]!];
      const [exact, wild] = await Promise.all([
        c1.post("/api/hostnames", { hostname: `demo.${base}`, user_id: users.a, verified: true }),
        c2.post("/api/hostnames", { hostname: `*.${base}`, user_id: users.b, verified: true }),
      ]);
      expect([exact.status, wild.status].sort()).toEqual([201, 409]);
      expect((exact.status === 409 ? exact : wild).body.error).toContain("overlaps");
    }
    const rows = (await clients[0]!.get("/api/hostnames")).body as { hostname: string; user_id: number }[];
    expect(rows.filter((r) => r.hostname.endsWith(".race.test"))).toHaveLength(ROUNDS);
  });

  test("the same hostname by two users on two nodes at once: one 201, the other 409 HOSTNAME_TAKEN (never a 500)", async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const hostname = `same${round}.race2.test`;
      const answers = await Promise.all([
        clients[0]!.post("/api/hostnames", { hostname, user_id: users.a }),
        clients[1]!.post("/api/hostnames", { hostname, user_id: users.b }),
      ]);
      expect(answers.map((a) => a.status).sort()).toEqual([201, 409]);
    }
  });
});
