/**
 * Admin API keys through a real server, used the way a script uses them
 * (fetch with `Authorization: Bearer brk_...`, no cookie): made once with
 * the secret shown once, listed without it, acting as their admin, refused
 * with 401 once revoked or expired, and dead once their admin is demoted or
 * disabled. The cross-site check does not apply to a key, and a key never
 * opens the way for a cookie.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
}, 30_000);
afterAll(() => server?.stop());

const KEY_FIELDS = ["created_at", "expires_at", "id", "last_used", "name", "revoked_at", "status", "user_id", "username"];

/** What a script does: fetch with the key, and nothing else. */
async function withKey(key: string, method: string, path: string, body?: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(server.adminUrl + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body === undefined ? {} : { "Content-Type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  let parsed: any = text;
  try {
    parsed = JSON.parse(text);
  } catch {}
  return { status: res.status, body: parsed };
}

async function makeKey(client = api, body: Record<string, unknown> = { name: "ci" }) {
  const res = await client.post("/api/keys", body);
  expect(res.status).toBe(201);
  return res.body as { key: string; key_id: number; name: string; created_at: string; expires_at: string | null; message: string };
}

function sql(statement: string, ...params: (string | number)[]) {
  const db = new Database(join(server.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    return db.query(statement).all(...params) as Record<string, any>[];
  } finally {
    db.close();
  }
}

describe("making a key", () => {
  test("answers 201 with a brk_ secret of 256 bits, shown this once", async () => {
    const made = await makeKey(api, { name: "deploy" });
    expect(Object.keys(made).sort()).toEqual(["created_at", "expires_at", "key", "key_id", "message", "name"]);
    expect(made.key).toMatch(/^brk_[0-9A-Za-z]{43}$/);
    expect(made.name).toBe("deploy");
    expect(made.expires_at).toBeNull();
    const again = await makeKey(api, { name: "deploy" });
    expect(again.key).not.toBe(made.key);
    expect(again.key_id).toBeGreaterThan(made.key_id);
  });

  test("expires_in_days sets expires_at that many days ahead", async () => {
    const made = await makeKey(api, { name: "short", expires_in_days: 7 });
    const days = (Date.parse(made.expires_at!) - Date.parse(made.created_at)) / 86_400_000;
    expect(days).toBe(7);
  });

  test("stores only a SHA-256 of the secret", async () => {
    const made = await makeKey(api, { name: "hashed" });
    const [row] = sql("SELECT * FROM admin_keys WHERE id = ?", made.key_id);
    expect(JSON.stringify(row)).not.toContain(made.key);
    expect(row!.secret_hash).toBe(new Bun.CryptoHasher("sha256").update(made.key).digest("hex"));
  });

  test.each([
    [{}, "name"],
    [{ name: "" }, "name"],
    [{ name: 5 }, "name"],
    [{ name: "x".repeat(101) }, "name"],
    [{ name: "k", expires_in_days: 0 }, "expires_in_days"],
    [{ name: "k", expires_in_days: 1.5 }, "expires_in_days"],
    [{ name: "k", expires_in_days: 3651 }, "expires_in_days"],
    [{ name: "k", expires_in_days: "7" }, "expires_in_days"],
  ])("%j is 400 naming %s", async (body, field) => {
    const res = await api.post("/api/keys", body);
    expect(res.status).toBe(400);
    expect(res.body).toEqual({ error: expect.stringContaining(field) });
  });

  test("needs a session: a key cannot make another key (403), and no credentials is 401", async () => {
    const made = await makeKey();
    const res = await withKey(made.key, "POST", "/api/keys", { name: "child" });
    expect(res.status).toBe(403);
    expect(res.body).toEqual({ error: expect.any(String) });
    const anonymous = await new AdminClient(server.adminUrl).post("/api/keys", { name: "x" });
    expect(anonymous.status).toBe(401);
  });
});

describe("listing keys", () => {
  test("shows each key with its owner and state, and never a secret", async () => {
    const made = await makeKey(api, { name: "listed" });
    const res = await api.get("/api/keys");
    expect(res.status).toBe(200);
    const item = (res.body as any[]).find((k) => k.id === made.key_id);
    expect(Object.keys(item).sort()).toEqual(KEY_FIELDS);
    expect(item).toMatchObject({ name: "listed", username: "admin", status: "active", revoked_at: null, last_used: null });
    const text = JSON.stringify(res.body);
    expect(text).not.toContain(made.key);
    expect(text).not.toContain(made.key.slice(4, 16));
    expect(text).not.toMatch(/brk_/);
    expect(res.body.map((k: any) => k.id)).toEqual([...res.body.map((k: any) => k.id)].sort((a: number, b: number) => a - b));
  });

  test("works with a key too, and marks when a key was last used", async () => {
    const made = await makeKey(api, { name: "used" });
    const res = await withKey(made.key, "GET", "/api/keys");
    expect(res.status).toBe(200);
    const item = res.body.find((k: any) => k.id === made.key_id);
    expect(Date.parse(item.last_used)).toBeGreaterThan(Date.now() - 60_000);
  });
});

describe("using a key", () => {
  test("a script with only the key can do what its admin can", async () => {
    const made = await makeKey(api, { name: "script" });
    expect(await withKey(made.key, "GET", "/api/auth/me")).toMatchObject({ status: 200, body: { username: "admin", role: "admin" } });
    const created = await withKey(made.key, "POST", "/api/users", { username: "from-script", password: "password-123", max_tunnels: 2 });
    expect(created.status).toBe(201);
    const token = await withKey(made.key, "POST", `/api/users/${created.body.id}/tokens`, { device_name: "ci" });
    expect(token.status).toBe(201);
    expect((await withKey(made.key, "PUT", `/api/users/${created.body.id}`, { max_tunnels: 4 })).body.max_tunnels).toBe(4);
    expect((await withKey(made.key, "DELETE", `/api/users/${created.body.id}`)).body).toEqual({ status: "deleted" });
  });

  test("is not under the browser's cross-site check: it carries no cookie a page could borrow", async () => {
    const made = await makeKey(api, { name: "cross" });
    const res = await withKey(made.key, "POST", "/api/users", { username: "cross-site-script", password: "password-123" }, {
      Origin: "https://elsewhere.example",
      "Sec-Fetch-Site": "cross-site",
    });
    expect(res.status).toBe(201);
  });

  test("with a cookie beside it, a key's request takes the cross-site check like any other", async () => {
    const made = await makeKey(api, { name: "with-cookie" });
    const res = await api.call("POST", "/api/users", { username: "cookie-and-key", password: "password-123" }, {
      Authorization: `Bearer ${made.key}`,
      Origin: "https://elsewhere.example",
    });
    expect(res.status).toBe(403);
    const same = await api.call("POST", "/api/users", { username: "cookie-and-key", password: "password-123" }, { Authorization: `Bearer ${made.key}` });
    expect(same.status).toBe(201);
  });

  test("a bad key is 401 even beside a valid session cookie: the cookie is not tried, nor the cross-site check skipped", async () => {
    // a Bearer header that is not one credential (two words, none at all) is a bad key too, not a missing one
    for (const bad of ["brk_" + "A".repeat(43), "brw_" + "A".repeat(43), "garbage", "brk_" + "A".repeat(43) + " extra", "", "a b c"]) {
      const res = await api.call("POST", "/api/users", { username: "never-made", password: "password-123" }, { Authorization: `Bearer ${bad}` });
      expect(res.status).toBe(401);
      expect(res.body).toEqual({ error: expect.any(String) });
    }
    expect((await api.get("/api/users")).body.map((u: any) => u.username)).not.toContain("never-made");
    // another scheme is not ours: the cookie decides, with its cross-site check
    const basic = await api.call("POST", "/api/users", { username: "basic-then-cookie", password: "password-123" }, {
      Authorization: "Basic YWRtaW46eA==",
      "Sec-Fetch-Site": "cross-site",
    });
    expect(basic.status).toBe(403);
  });

  test("reads /metrics as its admin would", async () => {
    const made = await makeKey(api, { name: "prometheus-by-key" });
    const res = await fetch(server.adminUrl + "/metrics", { headers: { Authorization: `Bearer ${made.key}` } });
    expect(res.status).toBe(200);
    await api.delete(`/api/keys/${made.key_id}`);
    expect((await fetch(server.adminUrl + "/metrics", { headers: { Authorization: `Bearer ${made.key}` } })).status).toBe(401);
  });

  test("login and the OpenAPI document ignore a key: they need none", async () => {
    const res = await withKey("brk_nonsense", "GET", "/api/openapi.json");
    expect(res.status).toBe(200);
  });
});

describe("a key stops working", () => {
  test("when revoked: 401 from then on; revoking again answers the same", async () => {
    const made = await makeKey(api, { name: "to-revoke" });
    expect((await withKey(made.key, "GET", "/api/users")).status).toBe(200);
    expect((await api.delete(`/api/keys/${made.key_id}`)).body).toEqual({ status: "revoked" });
    const res = await withKey(made.key, "GET", "/api/users");
    expect(res.status).toBe(401);
    expect(res.body).toEqual({ error: expect.any(String) });
    expect((await api.delete(`/api/keys/${made.key_id}`)).body).toEqual({ status: "revoked" });
    const item = (await api.get("/api/keys")).body.find((k: any) => k.id === made.key_id);
    expect(item.status).toBe("revoked");
    expect(item.revoked_at).not.toBeNull();
  });

  test("a key can revoke itself", async () => {
    const made = await makeKey(api, { name: "self" });
    expect((await withKey(made.key, "DELETE", `/api/keys/${made.key_id}`)).status).toBe(200);
    expect((await withKey(made.key, "GET", "/api/auth/me")).status).toBe(401);
  });

  test("when expired: 401, and listed as expired", async () => {
    const made = await makeKey(api, { name: "old", expires_in_days: 1 });
    expect((await withKey(made.key, "GET", "/api/auth/me")).status).toBe(200);
    sql("UPDATE admin_keys SET expires_at = ? WHERE id = ?", new Date(Date.now() - 1000).toISOString(), made.key_id);
    const res = await withKey(made.key, "GET", "/api/auth/me");
    expect(res.status).toBe(401);
    expect(res.body.error).toContain("expired");
    expect((await api.get("/api/keys")).body.find((k: any) => k.id === made.key_id).status).toBe("expired");
  });

  test("when its admin is demoted, and re-promoting does not bring it back", async () => {
    const id = await api.createUser("second-admin", { role: "admin" });
    const second = new AdminClient(server.adminUrl);
    expect((await second.login("second-admin", "password-123")).status).toBe(200);
    const made = await makeKey(second, { name: "theirs" });
    expect(await withKey(made.key, "GET", "/api/auth/me")).toMatchObject({ status: 200, body: { username: "second-admin" } });
    expect((await api.put(`/api/users/${id}`, { role: "user" })).status).toBe(200);
    expect((await withKey(made.key, "GET", "/api/users")).status).toBe(401);
    expect((await api.put(`/api/users/${id}`, { role: "admin" })).status).toBe(200);
    expect((await withKey(made.key, "GET", "/api/users")).status).toBe(401);
    expect((await api.get("/api/keys")).body.find((k: any) => k.id === made.key_id)).toMatchObject({ status: "revoked", username: "second-admin" });
  });

  test("when its admin is disabled, or deleted", async () => {
    const id = await api.createUser("third-admin", { role: "admin" });
    const third = new AdminClient(server.adminUrl);
    expect((await third.login("third-admin", "password-123")).status).toBe(200);
    const made = await makeKey(third, { name: "theirs" });
    const other = await makeKey(third, { name: "theirs-2" });
    expect((await api.put(`/api/users/${id}`, { enabled: false })).status).toBe(200);
    expect((await withKey(made.key, "POST", "/api/users", { username: "nope", password: "password-123" })).status).toBe(401);
    expect((await api.delete(`/api/users/${id}`)).status).toBe(200);
    expect((await withKey(other.key, "GET", "/api/users")).status).toBe(401);
    expect((await api.get("/api/keys")).body.find((k: any) => k.id === made.key_id)).toBeUndefined();
  });
});
