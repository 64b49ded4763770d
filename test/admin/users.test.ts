/**
 * /api/users against the real server: create with defaults and validation,
 * list, details, partial update, delete with everything the user owned, and
 * the rule that an enabled admin always remains (on servers of their own).
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { AdminClient, signedIn, type ApiResponse } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const USER_KEYS = [
  "allow_cidrs",
  "allowed_protocols",
  "can_share",
  "can_use_proxy",
  "created_at",
  "enabled",
  "id",
  "max_devices",
  "max_tunnels",
  "require_auth",
  "role",
  "skip_warning",
  "traffic_limit",
  "traffic_period",
  "updated_at",
  "username",
];
const DEFAULTS = {
  role: "user",
  enabled: true,
  max_tunnels: 0,
  allowed_protocols: "http,tcp",
  traffic_limit: 0,
  traffic_period: "monthly",
  max_devices: 0,
  skip_warning: false,
  can_use_proxy: true,
};
const PASSWORD = "password-123";

let server: TestServer;
let api: AdminClient;
let db: Database;
let seq = 0;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  db = new Database(join(server.dataDir, "burrow.db"));
  db.exec("PRAGMA busy_timeout = 5000");
});
afterAll(async () => {
  db?.close();
  await server?.stop();
});

const uniqueName = (prefix = "user") => `${prefix}${++seq}`;

function expectError(res: ApiResponse, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error).toBe("string");
  if (mentions) expect(res.body.error).toContain(mentions);
}

function expectUserShape(u: Record<string, unknown>) {
  expect(Object.keys(u).sort()).toEqual(USER_KEYS);
  expect(u.id).toBeInteger();
  expect(u.created_at).toMatch(ISO_UTC);
  expect(u.updated_at).toMatch(ISO_UTC);
}

async function create(extra: Record<string, unknown> = {}): Promise<ApiResponse> {
  return api.post("/api/users", { username: uniqueName(), password: PASSWORD, ...extra });
}

const count = (table: string, userId: number) =>
  (db.query(`SELECT count(*) AS n FROM ${table} WHERE user_id = ?`).get(userId) as { n: number }).n;

describe("creating a user", () => {
  test("answers 201 with the user object and the documented defaults", async () => {
    const name = uniqueName("defaults");
    const res = await api.post("/api/users", { username: name, password: PASSWORD });
    expect(res.status).toBe(201);
    expectUserShape(res.body);
    expect(res.body).toMatchObject({ username: name, ...DEFAULTS });
    expect(Date.parse(res.body.created_at)).toBeLessThanOrEqual(Date.parse(res.body.updated_at));
    expect(Math.abs(Date.parse(res.body.created_at) - Date.now())).toBeLessThan(10 * 60 * 1000);
  });

  test("keeps every setting given on create", async () => {
    const settings = {
      role: "user",
      max_tunnels: 3,
      allowed_protocols: "tcp",
      traffic_limit: 1_000_000,
      traffic_period: "daily",
      max_devices: 2,
      skip_warning: true,
      can_use_proxy: false,
    };
    const res = await create(settings);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject(settings);
    const details = await api.get(`/api/users/${res.body.id}`);
    expect(details.body.user).toMatchObject(settings);
  });

  test("gives ids in increasing order", async () => {
    const a = await create();
    const b = await create();
    expect(b.body.id).toBeGreaterThan(a.body.id);
  });

  test.each(["daily", "monthly", "quarterly"])("accepts traffic_period %s", async (period) => {
    const res = await create({ traffic_period: period });
    expect(res.status).toBe(201);
    expect(res.body.traffic_period).toBe(period);
  });

  test.each(["weekly", "yearly", "Monthly", "", "month"])("rejects traffic_period %p with 400", async (period) => {
    expectError(await create({ traffic_period: period }), 400, "traffic_period");
  });

  test.each(["user", "admin"])("accepts role %s", async (role) => {
    const res = await create({ role });
    expect(res.status).toBe(201);
    expect(res.body.role).toBe(role);
  });

  test.each(["ADMIN", "Admin", "root", "superuser", "", "admin "])("rejects role %p with 400", async (role) => {
    expectError(await create({ role }), 400, "role");
  });

  test.each([
    ["http,tcp", "http,tcp"],
    ["tcp,http", "http,tcp"],
    ["TCP, http,tcp", "http,tcp"],
    ["http", "http"],
    ["tcp", "tcp"],
    ["HTTP", "http"],
    [" tcp , tcp ", "tcp"],
    ["http,,tcp,", "http,tcp"],
  ])("normalises allowed_protocols %p to %p", async (given, stored) => {
    const res = await create({ allowed_protocols: given });
    expect(res.status).toBe(201);
    expect(res.body.allowed_protocols).toBe(stored);
    expect((await api.get(`/api/users/${res.body.id}`)).body.user.allowed_protocols).toBe(stored);
  });

  test.each(["", " ", ",", " , ", "quic", "http,quic", "http;tcp", "https", "http tcp"])(
    "rejects allowed_protocols %p with 400",
    async (given) => {
      expectError(await create({ allowed_protocols: given }), 400, "allowed_protocols");
    },
  );

  test.each(["max_tunnels", "traffic_limit", "max_devices"])("accepts 0 (unlimited) and large values for %s", async (field) => {
    const zero = await create({ [field]: 0 });
    expect(zero.status).toBe(201);
    expect(zero.body[field]).toBe(0);
    const big = await create({ [field]: 1_000_000_000_000 });
    expect(big.status).toBe(201);
    expect(big.body[field]).toBe(1_000_000_000_000);
  });

  test.each(["max_tunnels", "traffic_limit", "max_devices"])("rejects a negative %s with 400 naming it", async (field) => {
    expectError(await create({ [field]: -1 }), 400, field);
  });

  test.each([
    ["one character", "a"],
    ["64 characters", "u".repeat(64)],
    ["dots and dashes", "john.doe-smith"],
    ["an email address", "jane_doe@example.com"],
    ["digits only", "1234567"],
    ["mixed case", "MiXeD_Case"],
  ])("accepts a username of %s", async (_label, name) => {
    const res = await api.post("/api/users", { username: name, password: PASSWORD });
    expect(res.status).toBe(201);
    expect(res.body.username).toBe(name);
  });

  test.each([
    ["empty", ""],
    ["65 characters", "u".repeat(65)],
    ["a space", "john doe"],
    ["a leading space", " john"],
    ["a slash", "a/b"],
    ["a colon", "a:b"],
    ["a quote", "o'brien"],
    ["a plus", "a+b"],
    ["a non-ASCII letter", "ålice"],
    ["CJK characters", "名前"],
    ["an emoji", "smile😀"],
    ["a tab", "tab\tname"],
    ["a newline", "line\nname"],
  ])("rejects a username with %s with 400", async (_label, name) => {
    expectError(await api.post("/api/users", { username: name, password: PASSWORD }), 400, "username");
  });

  test("accepts passwords of 8 and of 1024 characters and rejects 7 and 1025", async () => {
    expect((await create({ password: "x".repeat(8) })).status).toBe(201);
    expect((await create({ password: "y".repeat(1024) })).status).toBe(201);
    expectError(await create({ password: "x".repeat(7) }), 400, "password");
    expectError(await create({ password: "x".repeat(1025) }), 400, "password");
    expectError(await create({ password: "" }), 400, "password");
  });

  test("rejects a duplicate username with 409, whatever its case", async () => {
    const base = uniqueName("Alice");
    expect((await api.post("/api/users", { username: base, password: PASSWORD })).status).toBe(201);
    for (const name of [base, base.toLowerCase(), base.toUpperCase()]) {
      expectError(await api.post("/api/users", { username: name, password: PASSWORD }), 409);
    }
    const list = (await api.get("/api/users")).body as { username: string }[];
    expect(list.filter((u) => u.username.toLowerCase() === base.toLowerCase())).toHaveLength(1);
  });

  test("rejects the first admin's name in another case with 409", async () => {
    expectError(await api.post("/api/users", { username: "Admin", password: PASSWORD }), 409);
  });

  test("answers 400 naming the missing field when username or password is absent", async () => {
    expectError(await api.post("/api/users", { password: PASSWORD }), 400, "username");
    expectError(await api.post("/api/users", { username: uniqueName() }), 400, "password");
    expectError(await api.post("/api/users", {}), 400);
  });

  test("says a missing field is required", async () => {
    const res = await api.post("/api/users", { password: PASSWORD });
    expect(res.body.error).toBe("username is required");
  });

  test("never lets a body set id, created_at or password_hash, or make an admin by a made-up field", async () => {
    const res = await create({ id: 999_999, created_at: "2000-01-01T00:00:00.000Z", password_hash: "x", is_admin: true });
    if (res.status === 400) return expectError(res, 400); // refusing unknown fields would be fine too
    expect(res.status).toBe(201);
    expect(res.body.id).not.toBe(999_999);
    expect(res.body.created_at).not.toBe("2000-01-01T00:00:00.000Z");
    expect(res.body.role).toBe("user");
    expect(res.body).not.toHaveProperty("password_hash");
  });
});

describe("listing users", () => {
  test("returns every user, ordered by id ascending, with all fields except the password", async () => {
    const made = [(await create()).body, (await create({ role: "admin" })).body, (await create()).body];
    const res = await api.get("/api/users");
    expect(res.status).toBe(200);
    expect(Array.isArray(res.body)).toBe(true);
    const list = res.body as Record<string, any>[];
    const ids = list.map((u) => u.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    expect(new Set(ids).size).toBe(ids.length);
    expect(list[0]).toMatchObject({ id: 1, username: "admin", role: "admin", enabled: true });
    for (const u of list) expectUserShape(u);
    for (const m of made) expect(list.find((u) => u.id === m.id)).toEqual(m);
    expect(JSON.stringify(list)).not.toMatch(/password|hash|argon2/i);
  });
});

describe("reading one user", () => {
  test("returns {user, traffic_used, active_tokens} with the same user object as the list", async () => {
    const made = (await create({ max_tunnels: 4 })).body;
    const res = await api.get(`/api/users/${made.id}`);
    expect(res.status).toBe(200);
    expect(Object.keys(res.body).sort()).toEqual(["active_tokens", "traffic_used", "user"]);
    expect(res.body.user).toEqual(made);
    expect(res.body.traffic_used).toBe(0);
    expect(res.body.active_tokens).toBe(0);
  });

  test("counts only tokens that are not revoked in active_tokens", async () => {
    const id = (await create()).body.id;
    const t1 = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
    const t2 = await api.post(`/api/users/${id}/tokens`, { device_name: "phone" });
    await api.post(`/api/users/${id}/tokens`, { device_name: "server" });
    expect([t1.status, t2.status]).toEqual([201, 201]);
    expect((await api.get(`/api/users/${id}`)).body.active_tokens).toBe(3);
    expect((await api.delete(`/api/tokens/${t1.body.token_id}`)).status).toBe(200);
    expect((await api.get(`/api/users/${id}`)).body.active_tokens).toBe(2);
  });

  test("reports traffic_used as an integer: the bytes in and out of the current period", async () => {
    const id = (await create({ traffic_period: "monthly" })).body.id;
    const today = new Date().toISOString().slice(0, 10);
    const insert = db.query("INSERT INTO traffic_daily (user_id, date, bytes_in, bytes_out) VALUES (?, ?, ?, ?)");
    insert.run(id, today, 1000, 234);
    insert.run(id, "2001-01-01", 5_000_000, 5_000_000); // long before this period
    const res = await api.get(`/api/users/${id}`);
    expect(res.body.traffic_used).toBeInteger();
    expect(res.body.traffic_used).toBe(1234);
  });

  test("answers 404 for an id that does not exist", async () => {
    expectError(await api.get("/api/users/999999"), 404);
  });

  test.each(["abc", "1.5", "1e3", "0x10", "1a", "%20", "two"])("answers 400 for the non-integer id %p", async (id) => {
    expectError(await api.get(`/api/users/${id}`), 400, "id");
  });
});

describe("updating a user", () => {
  test("changes only the included field and returns the updated user", async () => {
    const before = (
      await create({ max_tunnels: 2, allowed_protocols: "http", traffic_limit: 50, traffic_period: "quarterly", max_devices: 1 })
    ).body;
    const res = await api.put(`/api/users/${before.id}`, { max_tunnels: 7 });
    expect(res.status).toBe(200);
    expectUserShape(res.body);
    const { updated_at: beforeUpdated, ...beforeRest } = before;
    const { updated_at: afterUpdated, ...afterRest } = res.body;
    expect(afterRest).toEqual({ ...beforeRest, max_tunnels: 7 });
    expect(afterUpdated >= beforeUpdated).toBe(true);
    expect(res.body.created_at).toBe(before.created_at);
    expect((await api.get(`/api/users/${before.id}`)).body.user).toEqual(res.body);
  });

  test("can change every setting at once", async () => {
    const id = (await create()).body.id;
    const changes = {
      role: "admin",
      enabled: false,
      max_tunnels: 9,
      allowed_protocols: "tcp, TCP",
      traffic_limit: 123456789,
      traffic_period: "daily",
      max_devices: 4,
      skip_warning: true,
      can_use_proxy: false,
    };
    const res = await api.put(`/api/users/${id}`, changes);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ ...changes, allowed_protocols: "tcp" });
    expect((await api.get(`/api/users/${id}`)).body.user).toEqual(res.body);
  });

  test("an empty body changes no field, and updated_at does not go backwards", async () => {
    const before = (await create({ skip_warning: true })).body;
    const res = await api.put(`/api/users/${before.id}`, {});
    expect(res.status).toBe(200);
    const { updated_at, ...rest } = res.body;
    const { updated_at: beforeUpdated, ...beforeRest } = before;
    expect(rest).toEqual(beforeRest);
    expect(updated_at >= beforeUpdated).toBe(true);
  });

  test("disables and re-enables a user", async () => {
    const id = (await create()).body.id;
    expect((await api.put(`/api/users/${id}`, { enabled: false })).body.enabled).toBe(false);
    expect((await api.get(`/api/users/${id}`)).body.user.enabled).toBe(false);
    expect((await api.put(`/api/users/${id}`, { enabled: true })).body.enabled).toBe(true);
    expect((await api.get(`/api/users/${id}`)).body.user.enabled).toBe(true);
  });

  test("renames a user, and the new name is taken for others in any case", async () => {
    const id = (await create()).body.id;
    const newName = uniqueName("Renamed");
    const res = await api.put(`/api/users/${id}`, { username: newName });
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(newName);
    expectError(await api.post("/api/users", { username: newName.toLowerCase(), password: PASSWORD }), 409);
  });

  test("refuses with 409 to rename a user to another user's name in any case, and changes nothing", async () => {
    const taken = (await create()).body.username as string;
    const before = (await create()).body;
    expectError(await api.put(`/api/users/${before.id}`, { username: taken.toUpperCase(), max_tunnels: 5 }), 409);
    expect((await api.get(`/api/users/${before.id}`)).body.user).toEqual(before);
  });

  test("lets a user keep their own name in another case", async () => {
    const before = (await create()).body;
    const res = await api.put(`/api/users/${before.id}`, { username: before.username.toUpperCase() });
    expect(res.status).toBe(200);
    expect(res.body.username).toBe(before.username.toUpperCase());
  });

  test.each([
    ["a negative max_devices", { max_devices: -5 }, "max_devices"],
    ["an unknown protocol", { allowed_protocols: "ftp" }, "allowed_protocols"],
    ["an unknown period", { traffic_period: "weekly" }, "traffic_period"],
    ["an unknown role", { role: "owner" }, "role"],
    ["a short password", { password: "short" }, "password"],
    ["a bad username", { username: "bad name" }, "username"],
    ["enabled as a string", { enabled: "false" }, "enabled"],
    ["one good field and one bad", { max_tunnels: 5, traffic_limit: -1 }, "traffic_limit"],
  ])("rejects %s with 400 and changes nothing", async (_label, body, field) => {
    const before = (await create()).body;
    expectError(await api.put(`/api/users/${before.id}`, body), 400, field);
    expect((await api.get(`/api/users/${before.id}`)).body.user).toEqual(before);
  });

  test("answers 404 for an id that does not exist", async () => {
    expectError(await api.put("/api/users/999999", { max_tunnels: 1 }), 404);
    expectError(await api.put("/api/users/999999", {}), 404);
  });

  test.each(["abc", "1.5", "1e3"])("answers 400 for the non-integer id %p", async (id) => {
    expectError(await api.put(`/api/users/${id}`, { max_tunnels: 1 }), 400, "id");
  });
});

describe("deleting a user", () => {
  test("answers {status: deleted}; the user is then gone from details and list, and a second delete answers 404", async () => {
    const id = (await create()).body.id;
    const res = await api.delete(`/api/users/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "deleted" });
    expectError(await api.get(`/api/users/${id}`), 404);
    expectError(await api.put(`/api/users/${id}`, { max_tunnels: 1 }), 404);
    expect(((await api.get("/api/users")).body as { id: number }[]).some((u) => u.id === id)).toBe(false);
    expectError(await api.delete(`/api/users/${id}`), 404);
  });

  test("frees the username for a new user", async () => {
    const made = (await create()).body;
    await api.delete(`/api/users/${made.id}`);
    const again = await api.post("/api/users", { username: made.username, password: PASSWORD });
    expect(again.status).toBe(201);
    expect(again.body.id).not.toBe(made.id);
  });

  test("deletes the user's tokens, reserved subdomains, traffic rows and sessions, and nobody else's", async () => {
    const name = uniqueName("doomed");
    const id = await api.createUser(name, { role: "admin" });
    const keeper = await api.createUser(uniqueName("keeper"));
    const insertTraffic = db.query("INSERT INTO traffic_daily (user_id, date, bytes_in, bytes_out) VALUES (?, ?, ?, ?)");
    const tokenIds: number[] = [];
    for (const [owner, device] of [
      [id, "a"],
      [id, "b"],
      [keeper, "k"],
    ] as const) {
      const t = await api.post(`/api/users/${owner}/tokens`, { device_name: device });
      expect(t.status).toBe(201);
      if (owner === id) tokenIds.push(t.body.token_id);
    }
    const sub = `doomed-${seq}`;
    expect((await api.post("/api/domains", { subdomain: sub, user_id: id })).status).toBe(201);
    expect((await api.post("/api/domains", { subdomain: `keeper-${seq}`, user_id: keeper })).status).toBe(201);
    insertTraffic.run(id, "2020-05-05", 10, 20);
    insertTraffic.run(keeper, "2020-05-05", 1, 2);
    const session = new AdminClient(server.adminUrl);
    expect((await session.login(name, PASSWORD)).status).toBe(200);
    for (const table of ["tokens", "reserved_subdomains", "traffic_daily", "sessions"]) expect(count(table, id)).toBeGreaterThan(0);

    expect((await api.delete(`/api/users/${id}`)).status).toBe(200);

    for (const table of ["tokens", "reserved_subdomains", "traffic_daily", "sessions"]) expect(count(table, id)).toBe(0);
    expect(count("tokens", keeper)).toBe(1);
    expect(count("reserved_subdomains", keeper)).toBe(1);
    expect(count("traffic_daily", keeper)).toBe(1);
    // and through the API
    expectError(await api.get(`/api/users/${id}/tokens`), 404);
    for (const tokenId of tokenIds) expectError(await api.delete(`/api/tokens/${tokenId}`), 404);
    const domains = (await api.get("/api/domains")).body as { subdomain: string; user_id: number }[];
    expect(domains.some((d) => d.user_id === id || d.subdomain === sub)).toBe(false);
    expect(domains.some((d) => d.user_id === keeper)).toBe(true);
    expect((await session.get("/api/auth/me")).status).toBe(401);
    // the subdomain can be reserved again
    expect((await api.post("/api/domains", { subdomain: sub, user_id: keeper })).status).toBe(201);
  });

  test("answers 404 for an id that does not exist and 400 for a non-integer id", async () => {
    expectError(await api.delete("/api/users/999999"), 404);
    expectError(await api.delete("/api/users/abc"), 400, "id");
    expectError(await api.delete("/api/users/2.0"), 400, "id");
  });
});

describe("the last enabled admin", () => {
  test("cannot be deleted, disabled or demoted (409), and still signs in afterwards", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    // a plain user does not count as an admin
    await admin.createUser("plain");
    expectError(await admin.delete("/api/users/1"), 409);
    expectError(await admin.put("/api/users/1", { enabled: false }), 409);
    expectError(await admin.put("/api/users/1", { role: "user" }), 409);
    expectError(await admin.put("/api/users/1", { role: "user", enabled: false, max_tunnels: 3 }), 409);
    const details = await admin.get("/api/users/1");
    expect(details.body.user).toMatchObject({ role: "admin", enabled: true, max_tunnels: 0 });
    expect((await new AdminClient(s.adminUrl).login()).status).toBe(200);
    // changes that keep them an enabled admin are fine
    expect((await admin.put("/api/users/1", { role: "admin", enabled: true, max_tunnels: 2 })).status).toBe(200);
  });

  test("with two enabled admins one can be disabled; then the other cannot be disabled, demoted or deleted", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    const second = await admin.createUser("second", { role: "admin" });
    expect((await admin.put(`/api/users/${second}`, { enabled: false })).status).toBe(200);
    expectError(await admin.put("/api/users/1", { enabled: false }), 409);
    expectError(await admin.put("/api/users/1", { role: "user" }), 409);
    expectError(await admin.delete("/api/users/1"), 409);
    // a disabled admin is no obstacle: it can be deleted
    expect((await admin.delete(`/api/users/${second}`)).status).toBe(200);
    expectError(await admin.delete("/api/users/1"), 409);
  });

  test("with two enabled admins one can be demoted or deleted, but not both", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    const second = await admin.createUser("second", { role: "admin" });
    const third = await admin.createUser("third", { role: "admin" });
    expect((await admin.put(`/api/users/${second}`, { role: "user" })).status).toBe(200);
    expect((await admin.delete(`/api/users/${third}`)).status).toBe(200);
    expectError(await admin.put("/api/users/1", { role: "user" }), 409);
  });

  test("an admin may disable themselves while another admin remains", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    await admin.createUser("second", { role: "admin", password: "second-password" });
    const res = await admin.put("/api/users/1", { enabled: false });
    expect(res.status).toBe(200);
    expect(res.body.enabled).toBe(false);
    expect((await admin.get("/api/auth/me")).status).toBe(401);
    const other = new AdminClient(s.adminUrl);
    expect((await other.login("second", "second-password")).status).toBe(200);
    expectError(await other.put("/api/users/2", { enabled: false }), 409);
  });

  test("when both of two admins are disabled at the same moment, exactly one request succeeds", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    const second = await admin.createUser("second", { role: "admin" });
    // with a password in the body each update awaits a hash before its check: the widest window for a race
    const results = await Promise.all([
      admin.put("/api/users/1", { enabled: false, password: "another-password-1" }),
      admin.put(`/api/users/${second}`, { enabled: false, password: "another-password-2" }),
    ]);
    const statuses = results.map((r) => r.status).sort();
    expect(statuses[0]).toBe(200);
    // the loser is refused as the last admin (409), or its session already belongs to a disabled admin (401)
    expect([401, 409]).toContain(statuses[1]!);
    const sdb = new Database(join(s.dataDir, "burrow.db"));
    try {
      const row = sdb.query("SELECT count(*) AS n FROM users WHERE role = 'admin' AND enabled = 1").get() as { n: number };
      expect(row.n).toBe(1);
    } finally {
      sdb.close();
    }
  });
});
