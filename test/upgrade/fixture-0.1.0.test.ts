/**
 * A database as burrow 0.1.0 left it (test/fixtures/burrow-0.1.0.db), opened
 * by today's server: every row is still there and still works — its admins
 * sign in with their passwords, the admin API lists its users, tokens and
 * reserved subdomains as stored, its tokens connect agents (and its revoked
 * token and disabled user are still refused) — and afterwards each table
 * holds what it held before, column for column, save what using it changes
 * (a token's last_used, today's traffic). When a later burrow adds
 * migrations, this is the test that says whether they kept 0.1.0's data,
 * and that the upgrade left a backup of it.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { migrations } from "../../src/db/migrations.ts";
import { encodeVersion } from "../../src/db/version-record.ts";
import { VERSION } from "../../src/version.ts";
import { AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { dumpTables, fixtureDataDir, fixtureInfo, integrityCheck, primaryKeys, userVersion, type Dump, type Row } from "../harness/db.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const FIXTURE = "0.1.0";
const info = fixtureInfo(FIXTURE);
/** Columns that using the database is expected to change, and how. */
const MAY_CHANGE: Record<string, Record<string, "any" | "grows">> = {
  tokens: { last_used: "any" },
  traffic_daily: { bytes_in: "grows", bytes_out: "grows" },
  sqlite_sequence: { seq: "grows" },
};

let dataDir: string;
let dbPath: string;
let before: Dump;
let versionBefore: number;
let keys: Record<string, string[]>;
let server: TestServer | undefined;
let api: AdminClient;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upgraded ${new URL(req.url).pathname}`) });

beforeAll(async () => {
  dataDir = fixtureDataDir(FIXTURE);
  dbPath = join(dataDir, "burrow.db");
  before = dumpTables(dbPath);
  versionBefore = userVersion(dbPath);
  keys = primaryKeys(dbPath);
  server = await startServer({ dataDir });
  api = new AdminClient(server.adminUrl);
  const login = await api.login(info.admin.username, info.admin.password);
  expect(login.status).toBe(200);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  rmSync(dataDir, { recursive: true, force: true });
});

const bool = (v: unknown) => v === 1 || v === true;
const userId = (name: string) => before.users!.find((u) => u.username === name)!.id as number;

describe(`the ${FIXTURE} fixture opened by burrow ${VERSION}`, () => {
  test("the fixture is what it claims: 0.1.0's one migration, no version recorded, rows in every table that matters", () => {
    expect(before.__drizzle_migrations!.map((m) => m.created_at)).toEqual([migrations[0]!.when]);
    expect(versionBefore).toBe(0);
    for (const table of ["users", "tokens", "reserved_subdomains", "traffic_daily"]) expect(before[table]!.length).toBeGreaterThan(0);
  });

  test("its admins sign in with their own passwords", async () => {
    const ops = new AdminClient(server!.adminUrl);
    expect((await ops.login("ops@example.com", info.users.find((u) => u.username === "ops@example.com")!.password)).status).toBe(200);
    expect((await ops.get("/api/auth/me")).body).toMatchObject({ username: "ops@example.com", role: "admin" });
  });

  test("GET /api/users lists every stored user with every setting", async () => {
    const res = await api.get("/api/users");
    expect(res.status).toBe(200);
    expect(res.body).toEqual(
      before.users!.map((u) => ({
        id: u.id,
        username: u.username,
        role: u.role,
        enabled: bool(u.enabled),
        max_tunnels: u.max_tunnels,
        allowed_protocols: u.allowed_protocols,
        traffic_limit: u.traffic_limit,
        traffic_period: u.traffic_period,
        max_devices: u.max_devices,
        skip_warning: bool(u.skip_warning),
        can_use_proxy: bool(u.can_use_proxy),
        // added after 0.1.0, with the defaults that keep its behaviour
        can_share: true,
        require_auth: false,
        allow_cidrs: [],
        created_at: u.created_at,
        updated_at: u.updated_at,
      })),
    );
  });

  test("each user's tokens are listed as stored, revoked ones included", async () => {
    for (const user of before.users!) {
      const res = await api.get(`/api/users/${user.id}/tokens`);
      expect(res.status).toBe(200);
      expect(res.body).toEqual(
        before
          .tokens!.filter((t) => t.user_id === user.id)
          .map((t) => ({ id: t.id, user_id: t.user_id, device_name: t.device_name, enabled: bool(t.enabled), created_at: t.created_at, last_used: t.last_used })),
      );
    }
  });

  test("reserved subdomains are listed with their owners", async () => {
    const res = await api.get("/api/domains");
    expect(res.status).toBe(200);
    expect(res.body).toEqual(
      before.reserved_subdomains!.map((d) => ({
        id: d.id,
        subdomain: d.subdomain,
        user_id: d.user_id,
        username: before.users!.find((u) => u.id === d.user_id)!.username,
        created_at: d.created_at,
      })),
    );
  });

  test("a fixture token connects an agent on its user's reserved subdomain, and visitors get through", async () => {
    await using agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server!.edgeUrl, token: info.tokens["alice/laptop"]!, args: ["--subdomain", "alice"] });
    const res = await tunnelFetch(server!.edgePort, "alice", "/after-upgrade");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("upgraded /after-upgrade");
    const detail = await api.get(`/api/users/${userId("alice")}`);
    expect(detail.body.active_tokens).toBe(1); // laptop; the phone's was revoked in 0.1.0
  });

  test("the revoked token and the disabled user are still refused", async () => {
    const common = { kind: "http" as const, target: upstream.port!, server: server!.edgeUrl };
    await using phone = await startAgent({ ...common, token: info.tokens["alice/phone"]!, waitFor: /TOKEN_DISABLED/ });
    await using carol = await startAgent({ ...common, token: info.tokens["Carol.W/desktop"]!, waitFor: /USER_DISABLED/ });
    expect(await phone.proc.exited).toBe(1);
    expect(await carol.proc.exited).toBe(1);
  });

  test("bob's token opens the TCP tunnels his settings allow, and not the HTTP ones they do not", async () => {
    const common = { target: upstream.port!, server: server!.edgeUrl, token: info.tokens["bob/db server"]! };
    await using tcp = await startAgent({ ...common, kind: "tcp" });
    expect(tcp.port).toBeGreaterThan(0);
    await using http = await startAgent({ ...common, kind: "http", waitFor: /PROTOCOL_DENIED/ });
    expect(await http.proc.exited).toBe(1);
  });

  test("a reserved subdomain is still kept for its owner", async () => {
    const newcomer = await api.createUser("newcomer");
    const token = await api.createToken(newcomer);
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server!.edgeUrl, token, args: ["--subdomain", "alice-dev"], waitFor: /SUBDOMAIN_RESERVED/ });
    expect(await agent.proc.exited).toBe(1);
  });
});

describe("after the server stops", () => {
  let after: Dump;
  beforeAll(async () => {
    await server!.stop();
    server = undefined;
    after = dumpTables(dbPath);
  });

  test("every table of the fixture still holds each of its rows, column for column, save what use changed", () => {
    for (const [table, rows] of Object.entries(before)) {
      expect(after[table], `table ${table} is gone`).toBeDefined();
      const pk = keys[table]!;
      const keyOf = (r: Row) => JSON.stringify(pk.length > 0 && pk.every((c) => r[c] !== null) ? pk.map((c) => r[c]) : r);
      const afterByKey = new Map(after[table]!.map((r) => [keyOf(r), r]));
      for (const old of rows) {
        const now = afterByKey.get(keyOf(old));
        expect(now, `${table} row ${keyOf(old)} is gone`).toBeDefined();
        for (const [column, value] of Object.entries(old)) {
          const rule = MAY_CHANGE[table]?.[column];
          if (rule === "any") continue;
          if (rule === "grows") expect(now![column] as number).toBeGreaterThanOrEqual(value as number);
          else expect(now![column], `${table}.${column} of ${keyOf(old)}`).toEqual(value);
        }
      }
    }
  });

  test("the database is sound and records this burrow's version", () => {
    expect(integrityCheck(dbPath)).toBe("ok");
    expect(userVersion(dbPath)).toBe(encodeVersion(VERSION));
  });

  test("the upgrade left a backup of the fixture exactly when it had migrations to apply", () => {
    const pending = migrations.filter((m) => m.when > Math.max(...before.__drizzle_migrations!.map((r) => Number(r.created_at))));
    const backup = join(dataDir, `burrow.db.bak-${FIXTURE}`);
    if (pending.length === 0) {
      expect(readdirSync(dataDir).filter((n) => n.includes(".bak-"))).toEqual([]);
    } else {
      expect(existsSync(backup)).toBe(true);
      expect(dumpTables(backup)).toEqual(before);
    }
  });
});
