/**
 * The audit log through a real server: each admin write recorded with who
 * did it (by session or by key), from where, what, and how it ended,
 * failures included; refused handshakes with their code, user and token;
 * GET /api/audit's filters, paging and bad input; no password or hash in
 * the table (read from the database file) or the API; a write the
 * database refuses is counted (burrow_audit_write_failures_total) and
 * logged, never failing the request; pruning by --audit-days when the
 * server starts.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureAdmin } from "../../src/core/bootstrap.ts";
import { createCore } from "../../src/core/index.ts";
import { openDatabase } from "../../src/db/open.ts";
import { createAdminApp, ROUTES } from "../../src/admin/app.ts";
import { backupRoutes } from "../../src/admin/backup.ts";
import { metricsRoutes } from "../../src/admin/metrics.ts";
import { EdgeCounters } from "../../src/metrics/edge-counters.ts";
import { createMetrics } from "../../src/metrics/registry.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let api: AdminClient;

const ALICE_PASSWORD = "alice-secret-pw-1";
const ALICE_NEW_PASSWORD = "alice-secret-pw-2";
const WRONG_PASSWORD = "not-the-password-9";
const METRICS_TOKEN = "audit-test-metrics-token-1";

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
}, 30_000);
afterAll(() => server?.stop());

interface Entry {
  id: number;
  at: string;
  user_id: number | null;
  username: string | null;
  key_id: number | null;
  token_id: number | null;
  address: string;
  action: string;
  target: string | null;
  outcome: string;
  code: string | null;
  details: Record<string, any> | null;
  count: number;
}

async function entries(query = ""): Promise<Entry[]> {
  const res = await api.get(`/api/audit${query}`);
  expect(res.status).toBe(200);
  return res.body;
}

/** The newest entry of an action (the server writes it before it answers). */
async function latest(action: string): Promise<Entry> {
  const [e] = await entries(`?action=${action}&limit=1`);
  expect(e, `an entry for ${action}`).toBeDefined();
  return e!;
}

function rawRows(): Record<string, unknown>[] {
  const db = new Database(join(server.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    return db.query("SELECT * FROM audit_log").all() as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

describe("admin writes are recorded with who, from where, what and the outcome", () => {
  test("signing in, and a failed sign-in with the username it tried", async () => {
    const me = (await api.get("/api/auth/me")).body;
    const login = await latest("auth.login");
    expect(login).toMatchObject({ user_id: me.id, username: "admin", address: "127.0.0.1", outcome: "ok", key_id: null, count: 1 });
    expect(Date.parse(login.at)).toBeGreaterThan(Date.now() - 60_000);

    const stranger = new AdminClient(server.adminUrl);
    expect((await stranger.login("admin", WRONG_PASSWORD)).status).toBe(401);
    const failed = (await entries("?action=auth.login")).find((e) => e.outcome === "failed")!;
    expect(failed).toMatchObject({ username: "admin", user_id: me.id, address: "127.0.0.1", code: "UNAUTHORIZED" });
  });

  test("creating, changing and deleting a user, with the changed fields and never the password", async () => {
    const id = await api.createUser("audited-alice", { max_tunnels: 3 });
    const created = await latest("user.create");
    expect(created).toMatchObject({ username: "admin", target: `user:${id}`, outcome: "ok", address: "127.0.0.1" });
    expect(created.details!.fields).toMatchObject({ username: "audited-alice", max_tunnels: 3, role: "user" });

    expect((await api.put(`/api/users/${id}`, { max_tunnels: 5, enabled: false, password: ALICE_NEW_PASSWORD })).status).toBe(200);
    const updated = await latest("user.update");
    expect(updated.target).toBe(`user:${id}`);
    expect(updated.details).toEqual({
      changes: { max_tunnels: { from: 3, to: 5 }, enabled: { from: true, to: false } },
      password_changed: true,
    });

    expect((await api.delete(`/api/users/${id}`)).status).toBe(200);
    expect(await latest("user.delete")).toMatchObject({ target: `user:${id}`, details: { username: "audited-alice" }, outcome: "ok" });
  });

  test("a write that fails is recorded with its code", async () => {
    await api.createUser("audited-twice");
    expect((await api.post("/api/users", { username: "AUDITED-twice", password: ALICE_PASSWORD })).status).toBe(409);
    expect(await latest("user.create")).toMatchObject({ outcome: "failed", code: "USERNAME_TAKEN", username: "admin" });
    expect((await api.put("/api/users/999999", { max_tunnels: 1 })).status).toBe(404);
    expect(await latest("user.update")).toMatchObject({ outcome: "failed", code: "NOT_FOUND", target: "user:999999" });
  });

  test("tokens made and revoked, subdomains reserved and released", async () => {
    const id = await api.createUser("audited-bob");
    const made = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
    expect(await latest("token.create")).toMatchObject({ target: `token:${made.body.token_id}`, details: { user_id: id, username: "audited-bob", device_name: "laptop" } });
    await api.delete(`/api/tokens/${made.body.token_id}`);
    expect(await latest("token.revoke")).toMatchObject({ target: `token:${made.body.token_id}`, outcome: "ok" });

    const reserved = await api.post("/api/domains", { subdomain: "audited-bob", user_id: id });
    expect(await latest("domain.reserve")).toMatchObject({ target: `domain:${reserved.body.id}`, details: { subdomain: "audited-bob", user_id: id } });
    await api.delete(`/api/domains/${reserved.body.id}`);
    expect(await latest("domain.release")).toMatchObject({ target: `domain:${reserved.body.id}`, details: { subdomain: "audited-bob", user_id: id } });
  });

  test("a request made with an API key names the key, and the admin who made it", async () => {
    const key = await api.post("/api/keys", { name: "audit-script" });
    expect(await latest("key.create")).toMatchObject({ target: `key:${key.body.key_id}`, details: { name: "audit-script" }, key_id: null });
    const script = new AdminClient(server.adminUrl);
    const res = await script.call("POST", "/api/users", { username: "by-script", password: ALICE_PASSWORD }, { Authorization: `Bearer ${key.body.key}` });
    expect(res.status).toBe(201);
    expect(await latest("user.create")).toMatchObject({ username: "admin", key_id: key.body.key_id, target: `user:${res.body.id}` });
    await api.delete(`/api/keys/${key.body.key_id}`);
    expect(await latest("key.revoke")).toMatchObject({ target: `key:${key.body.key_id}`, key_id: null });
  });

  test("signing out", async () => {
    const other = await signedIn(server);
    expect((await other.post("/api/auth/logout")).status).toBe(200);
    expect(await latest("auth.logout")).toMatchObject({ username: "admin", outcome: "ok" });
  });

  test("reads are not recorded", async () => {
    const before = (await entries("?limit=1"))[0]!.id;
    await api.get("/api/users");
    await api.get("/api/dashboard");
    await api.get("/api/audit");
    expect((await entries("?limit=1"))[0]!.id).toBe(before);
  });
});

test("every state-changing route of the admin API names its audit action, so none can be forgotten", () => {
  const routes = [...ROUTES, ...backupRoutes({ dataDir: "/nonexistent", sqlite: undefined as never })];
  const writes = routes.flatMap((r) => Object.keys(r.methods).filter((m) => m !== "GET").map((m) => ({ r, m })));
  expect(writes.length).toBeGreaterThan(10);
  expect(writes.filter(({ r, m }) => !r.audit?.[m as "POST"]).map(({ r, m }) => `${m} ${r.path}`)).toEqual([]);
});

describe("refused agent handshakes", () => {
  test("are recorded with the code, the token's user and id when known, and the address", async () => {
    const id = await api.createUser("audited-carol");
    const made = await api.post(`/api/users/${id}/tokens`, { device_name: "old-phone" });
    await api.delete(`/api/tokens/${made.body.token_id}`);
    const answer = await sayHello({ port: server.agentPort!, via: "direct", from: "127.0.0.21", token: made.body.token });
    expect(answer.refusal?.code).toBe("TOKEN_DISABLED");
    const unknown = await sayHello({ port: server.edgePort, via: "websocket", from: "127.0.0.22" });
    expect(unknown.refusal?.code).toBe("AUTH_FAILED");

    const refused = await entries("?action=agent.refused");
    expect(refused.find((e) => e.address === "127.0.0.21")).toMatchObject({
      code: "TOKEN_DISABLED",
      outcome: "refused",
      user_id: id,
      username: "audited-carol",
      token_id: made.body.token_id,
    });
    expect(refused.find((e) => e.address === "127.0.0.22")).toMatchObject({ code: "AUTH_FAILED", user_id: null, token_id: null });
    // the refused user's id finds it too
    expect((await entries(`?user_id=${id}&action=agent.refused`)).map((e) => e.code)).toEqual(["TOKEN_DISABLED"]);
  });
});

describe("GET /api/audit", () => {
  test("pages newest first with limit and before_id, and filters by user_id and action", async () => {
    const all = await entries("?limit=1000");
    expect(all.length).toBeGreaterThan(10);
    expect(all.map((e) => e.id)).toEqual([...all].map((e) => e.id).sort((a, b) => b - a));
    const pages: number[] = [];
    let before = "";
    for (let i = 0; i < 100; i++) {
      const page = await entries(`?limit=4${before}`);
      if (page.length === 0) break;
      expect(page.length).toBeLessThanOrEqual(4);
      pages.push(...page.map((e) => e.id));
      before = `&before_id=${page.at(-1)!.id}`;
    }
    expect(pages).toEqual(all.map((e) => e.id));
    expect(await entries("?limit=1000&action=user.delete")).toSatisfy((list: Entry[]) => list.length > 0 && list.every((e) => e.action === "user.delete"));
    const me = (await api.get("/api/auth/me")).body;
    const mine = await entries(`?limit=1000&user_id=${me.id}`);
    expect(mine.length).toBeGreaterThan(0);
    expect(mine.every((e) => e.user_id === me.id)).toBe(true);
    expect(await entries("?user_id=987654")).toEqual([]);
  });

  test("the default is 100 entries", async () => {
    const id = await api.createUser("audited-many");
    for (let i = 0; i < 105; i++) await api.put(`/api/users/${id}`, { max_tunnels: i });
    expect(await entries()).toHaveLength(100);
    expect(await entries("?limit=1000")).not.toHaveLength(100);
  });

  test.each([
    ["limit=0", "limit"],
    ["limit=1001", "limit"],
    ["limit=abc", "limit"],
    ["limit=-1", "limit"],
    ["limit=1.5", "limit"],
    ["before_id=0", "before_id"],
    ["before_id=x", "before_id"],
    ["user_id=-3", "user_id"],
    ["user_id=", "user_id"],
    ["action=user.explode", "action"],
  ])("?%s is 400 naming %s", async (query, field) => {
    const res = await api.get(`/api/audit?${query}`);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringContaining(field) });
  });

  test("needs an admin: 401 without a session, and writes to it are 405", async () => {
    const anonymous = new AdminClient(server.adminUrl);
    const res = await anonymous.get("/api/audit");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: expect.any(String) });
    expect((await api.post("/api/audit", {})).status).toBe(405);
    expect((await api.delete("/api/audit")).status).toBe(405);
  });
});

describe("no password or hash anywhere", () => {
  test("not in the table, read from the database file, and not in the API", async () => {
    const rows = rawRows();
    expect(rows.length).toBeGreaterThan(10);
    const text = JSON.stringify(rows);
    const api1000 = JSON.stringify(await entries("?limit=1000"));
    for (const secret of [ALICE_PASSWORD, ALICE_NEW_PASSWORD, WRONG_PASSWORD, ADMIN_PASSWORD, "password-123", "$argon2"]) {
      expect(text).not.toContain(secret);
      expect(api1000).not.toContain(secret);
    }
    // nor any token or key secret
    expect(text).not.toMatch(/br[wk]_[A-Za-z0-9]{20}/);
  });
});

describe("writing the log never fails the request it records", () => {
  test("with the audit table gone, requests answer as always (200, 201, 409, 404, 401); each lost entry is counted in the metrics, and logged once for all", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-audit-broken-"));
    const database = openDatabase(dir);
    const errors: string[] = [];
    const spy = spyOn(console, "error").mockImplementation((...a: unknown[]) => void errors.push(a.join(" ")));
    const core = createCore({ store: database.store, systemSubdomains: [] });
    const metrics = createMetrics({ edge: new EdgeCounters(), live: () => undefined, logins: () => ({ failed: 0, throttled: 0 }), auditWriteFailures: () => core.audit.writeFailures });
    try {
      await ensureAdmin(core, { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD });
      const app = createAdminApp(core, { operations: metricsRoutes(metrics, METRICS_TOKEN) });
      await using http = Bun.serve({ hostname: "127.0.0.1", port: 0, development: false, routes: app.routes, fetch: app.fetch });
      const lost = async () => sample(await scrape(`http://127.0.0.1:${http.port}`, { Authorization: `Bearer ${METRICS_TOKEN}` }), "burrow_audit_write_failures_total");
      database.sqlite.run("DROP TABLE audit_log");
      const client = new AdminClient(`http://127.0.0.1:${http.port}`);
      expect(await lost()).toBe(0);
      expect((await client.login()).status).toBe(200);
      expect((await client.post("/api/users", { username: "still-made", password: ALICE_PASSWORD })).status).toBe(201);
      // failed requests: their entries are lost too, and counted the same
      expect((await client.post("/api/users", { username: "STILL-made", password: ALICE_PASSWORD })).status).toBe(409);
      expect((await client.put("/api/users/999999", { max_tunnels: 1 })).status).toBe(404);
      expect((await client.login("admin", WRONG_PASSWORD)).status).toBe(401);
      await core.audit.settled(); // a stranger's failed login is written in the background
      expect((await client.get("/api/users")).body.map((u: { username: string }) => u.username)).toContain("still-made");
      expect(await lost()).toBe(5);
      const lines = errors.filter((l) => l.includes("audit log: entry not written"));
      expect(lines).toHaveLength(1); // the next one waits 10 s, and says how many it left out
      expect(lines[0]).toContain("no such table");
    } finally {
      spy.mockRestore();
      metrics.stop();
      database.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("pruning", () => {
  test("--audit-days: entries older than that go when the server starts, the rest stay", async () => {
    const first = await startServer({ keepDataDir: true });
    const dataDir = first.dataDir;
    try {
      await signedIn(first);
      await first.stop();
      const db = new Database(join(dataDir, "burrow.db"));
      const old = new Date(Date.now() - 3 * 86_400_000).toISOString();
      db.run("INSERT INTO audit_log (at, address, action, outcome) VALUES (?, '10.9.9.9', 'user.create', 'ok'), (?, '10.9.9.9', 'user.delete', 'ok')", [old, old]);
      db.close();
      await using second = await startServer({ dataDir, args: ["--audit-days", "2"] });
      await waitUntil(() => second.output.text().includes("audit log pruned entries=2 older_than_days=2"), 5_000, "the prune's log line");
      const rest = (await (await signedIn(second)).get("/api/audit?limit=1000")).body as Entry[];
      expect(rest.filter((e) => e.address === "10.9.9.9")).toEqual([]);
      expect(rest.filter((e) => e.action === "auth.login").length).toBe(2); // today's, both servers'
    } finally {
      await first.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
