/**
 * `burrow server --database postgres://...`: the real server on a real
 * PostgreSQL (Debian's, private, on loopback), and two servers on one
 * database sharing everything the database holds: users, tokens, sessions,
 * reserved names, traffic and the audit log. Races between the two are
 * settled by the database: one username, one last admin.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";

let pg: TestPostgres;
beforeAll(async () => {
  pg = await startPostgres();
});
afterAll(async () => {
  await pg?.stop();
});

async function within<T>(ms: number, what: string, poll: () => Promise<T | undefined>): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const got = await poll();
    if (got !== undefined) return got;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms: ${what}`);
    await Bun.sleep(100);
  }
}

describe("one server on PostgreSQL", () => {
  let server: TestServer;
  let url: string;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`hello ${new URL(req.url).pathname}`) });
  beforeAll(async () => {
    url = await pg.newDatabase();
    server = await startServer({ args: ["--database", url] });
  });
  afterAll(async () => {
    await server?.stop();
    upstream.stop(true);
  });

  test("creates its tables from the embedded migrations and keeps the data there, not in the data dir", async () => {
    const api = await signedIn(server);
    const id = await api.createUser("pg-alice");
    const db = new SQL(url);
    try {
      const rows = await db`SELECT username, enabled, max_tunnels FROM users WHERE id = ${id}`;
      expect(rows[0]).toEqual({ username: "pg-alice", enabled: true, max_tunnels: "0" });
      const [{ n }] = await db`SELECT count(*)::int AS n FROM __drizzle_migrations`;
      expect(n).toBeGreaterThan(0);
    } finally {
      await db.close();
    }
    expect(await Bun.file(`${server.dataDir}/burrow.db`).exists()).toBe(false);
    expect(server.output.text()).toMatch(/data=127\.0\.0\.1:\d+\/\w+/);
  });

  test("a tunnel round trip, its traffic in the analytics, and the audit log", async () => {
    const api = await signedIn(server);
    const id = await api.createUser("pg-bob");
    expect((await api.post("/api/domains", { subdomain: "pg-bob-app", user_id: id })).status).toBe(201);
    const token = await api.createToken(id);
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "pg-bob-app"] });
    expect(agent.subdomain).toBe("pg-bob-app");
    const res = await tunnelFetch(server.edgePort, "pg-bob-app", "/x", { headers: { "X-Burrow-Skip-Warning": "1" } });
    expect(await res.text()).toBe("hello /x");
    const active = (await api.get("/api/tunnels/active")).body as { subdomain?: string }[];
    expect(active.map((t) => t.subdomain)).toContain("pg-bob-app");
    // the meter writes every 2 s
    const total = await within(10_000, "traffic in the analytics", async () => {
      const rows = (await api.get(`/api/analytics/traffic?user_id=${id}&days=1`)).body as { total: number }[];
      return rows[0] && rows[0].total > 0 ? rows[0].total : undefined;
    });
    expect(total).toBeGreaterThan("hello /x".length);
    const audit = (await api.get("/api/audit?action=domain.reserve")).body as { target: string }[];
    expect(audit.length).toBe(1);
  });

  test("POST /api/backup says to use pg_dump: 409 BACKUP_UNAVAILABLE, and the audit log has the refusal", async () => {
    const api = await signedIn(server);
    const res = await api.post("/api/backup");
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: "this server keeps its data in PostgreSQL: back it up with pg_dump" });
    const audit = (await api.get("/api/audit?action=database.backup")).body as { outcome: string; code: string }[];
    expect(audit[0]).toMatchObject({ outcome: "failed", code: "BACKUP_UNAVAILABLE" });
  });

  test("limits as large as 2^53 - 1 are stored and read back exactly", async () => {
    const api = await signedIn(server);
    const big = Number.MAX_SAFE_INTEGER;
    const res = await api.post("/api/users", { username: "pg-big", password: "password-123", max_tunnels: big, max_devices: big, traffic_limit: big });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ max_tunnels: big, max_devices: big, traffic_limit: big });
  });

  test("a failed query's log line names neither its parameters nor the database password", async () => {
    const api = await signedIn(server);
    const db = new SQL(url);
    try {
      // the server's next insert into tokens fails in the database itself
      await db`ALTER TABLE tokens ADD CONSTRAINT no_more_tokens CHECK (id < 0) NOT VALID`;
      const id = await api.createUser("pg-carol");
      const res = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
      expect(res.status).toBe(500);
      await db`ALTER TABLE tokens DROP CONSTRAINT no_more_tokens`;
    } finally {
      await db.close();
    }
    const line = await server.output.waitFor(/admin request failed/, 5_000);
    expect(line).toContain("no_more_tokens");
    expect(line).not.toContain("brw_");
    expect(line).not.toMatch(/params:|[0-9a-f]{64}/);
    expect(server.output.text()).not.toContain(new URL(url).password);
  });
});

describe("two servers on one database", () => {
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    const url = await pg.newDatabase();
    // started at once on an empty database: one applies the migrations and makes the first admin, the other waits and finds them
    [a, b] = await Promise.all([startServer({ args: ["--database", url] }), startServer({ args: ["--database", url] })]);
  });
  afterAll(async () => {
    await Promise.all([a?.stop(), b?.stop()]);
  });

  test("both started, and there is one admin", async () => {
    const api = await signedIn(a);
    const users = (await api.get("/api/users")).body as { username: string; role: string }[];
    expect(users.filter((u) => u.role === "admin").map((u) => u.username)).toEqual(["admin"]);
  });

  test("a session made on one is good on the other; signing out on one ends it on both", async () => {
    const onA = await signedIn(a);
    const onB = new AdminClient(b.adminUrl);
    onB.cookie = onA.cookie;
    expect((await onB.get("/api/users")).status).toBe(200);
    expect((await onA.post("/api/auth/logout")).status).toBe(200);
    expect((await onB.get("/api/users")).status).toBe(401);
  });

  test("what one writes the other reads: a user, a token, a reserved name", async () => {
    const onA = await signedIn(a);
    const onB = await signedIn(b);
    const id = await onA.createUser("shared-dave");
    const token = await onA.createToken(id);
    expect((await onB.post("/api/domains", { subdomain: "shared-dave", user_id: id })).status).toBe(201);
    expect(((await onB.get(`/api/users/${id}`)).body as { user: { username: string } }).user.username).toBe("shared-dave");
    const tokens = (await onB.get(`/api/users/${id}/tokens`)).body as unknown[];
    expect(tokens).toHaveLength(1);
    expect(token.startsWith("brw_")).toBe(true);
  });

  test("the same username asked of both at once: exactly one 201, the other 409 (taken)", async () => {
    const onA = await signedIn(a);
    const onB = await signedIn(b);
    for (let round = 0; round < 5; round++) {
      const body = { username: `race-${round}`, password: "password-123" };
      const [ra, rb] = await Promise.all([onA.post("/api/users", body), onB.post("/api/users", body)]);
      expect([ra.status, rb.status].sort()).toEqual([201, 409]);
      expect([ra, rb].find((r) => r.status === 409)!.body).toEqual({ error: `username 'race-${round}' is already taken` });
    }
  });

  test("two admins disabled at once on two servers: one stays, exactly one request succeeds", async () => {
    const onA = await signedIn(a);
    const second = (await onA.post("/api/users", { username: "admin-two", password: ADMIN_PASSWORD, role: "admin" })).body.id as number;
    const asTwo = new AdminClient(b.adminUrl);
    expect((await asTwo.login("admin-two")).status).toBe(200);
    const first = ((await onA.get("/api/users")).body as { id: number; username: string }[]).find((u) => u.username === "admin")!.id;
    // each disables the other
    const [r1, r2] = await Promise.all([onA.put(`/api/users/${second}`, { enabled: false }), asTwo.put(`/api/users/${first}`, { enabled: false })]);
    const statuses = [r1.status, r2.status].sort();
    expect(statuses[0]).toBe(200);
    expect([401, 409]).toContain(statuses[1]!);
    const admins = ((await new AdminClient(a.adminUrl).call("GET", "/api/users", undefined, { Cookie: (r1.status === 200 ? onA : asTwo).cookie! })).body as { role: string; enabled: boolean }[]).filter(
      (u) => u.role === "admin" && u.enabled,
    );
    expect(admins).toHaveLength(1);
  });
});

describe("a database that cannot be used", () => {
  test("an unreachable PostgreSQL: exit 1, a message naming host and database, never the password", async () => {
    const url = `postgres://burrow:s3cret-pass-word@127.0.0.1:1/nowhere`;
    const proc = Bun.spawn([process.execPath, `${import.meta.dir}/../../src/main.ts`, "server", "--database", url, "--admin-port", "0", "--http-port", "0", "--agent-port", "0"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD },
    });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
    const code = await proc.exited;
    clearTimeout(timer);
    const out = (await new Response(proc.stdout).text()) + (await new Response(proc.stderr).text());
    expect(code).toBe(1);
    expect(out).toContain("cannot connect to PostgreSQL at 127.0.0.1:1/nowhere");
    expect(out).not.toContain("s3cret-pass-word");
  });

  test("--database that is not a PostgreSQL URL is a usage error that does not echo it", async () => {
    const proc = Bun.spawn([process.execPath, `${import.meta.dir}/../../src/main.ts`, "server", "--database", "mysql://u:hunter2-secret@h/db"], { stdout: "pipe", stderr: "pipe" });
    const code = await proc.exited;
    const err = await new Response(proc.stderr).text();
    expect(code).toBe(2);
    expect(err).toContain("--database must be a PostgreSQL URL");
    expect(err).not.toContain("hunter2-secret");
  });
});
