/**
 * Sign-in, sessions and sign-out of the admin API, against the real server:
 * the cookie's attributes, session expiry (moved in the database file), what
 * happens to a session when its user changes, and login throttling (each
 * throttling test on a server of its own, so lockouts stay there).
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { AdminClient, signedIn, type ApiResponse } from "../harness/admin.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";

const COOKIE = "tunnel_admin_session";
const HOUR_MS = 3600 * 1000;

let server: TestServer;
let api: AdminClient;
let db: Database;
let seq = 0;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  db = openDb(server);
});
afterAll(async () => {
  db?.close();
  await server?.stop();
});

function openDb(s: TestServer): Database {
  const d = new Database(join(s.dataDir, "burrow.db"));
  d.exec("PRAGMA busy_timeout = 5000");
  return d;
}

/** A fresh name per call, so tests sharing the server never collide. */
const uniqueName = (prefix: string) => `${prefix}${++seq}`;

/** The value of the session cookie a client holds ("name=value" -> value). */
const cookieValue = (client: AdminClient) => client.cookie!.slice(COOKIE.length + 1);

const sha256Hex = (text: string) => new Bun.CryptoHasher("sha256").update(text).digest("hex");

/** The session row behind a client's cookie, straight from the database. */
function sessionRow(client: AdminClient): { user_id: number; created_at: string; last_seen_at: string } | null {
  return db
    .query("SELECT user_id, created_at, last_seen_at FROM sessions WHERE id_hash = ?")
    .get(sha256Hex(cookieValue(client))) as { user_id: number; created_at: string; last_seen_at: string } | null;
}

function moveSession(client: AdminClient, fields: { created_at?: Date; last_seen_at?: Date }) {
  const hash = sha256Hex(cookieValue(client));
  if (fields.created_at) db.query("UPDATE sessions SET created_at = ? WHERE id_hash = ?").run(fields.created_at.toISOString(), hash);
  if (fields.last_seen_at) db.query("UPDATE sessions SET last_seen_at = ? WHERE id_hash = ?").run(fields.last_seen_at.toISOString(), hash);
}

/** Splits a Set-Cookie header into its name=value and its attributes (lowercased names). */
function parseSetCookie(header: string): { name: string; value: string; attrs: Map<string, string> } {
  const [pair, ...rest] = header.split(";").map((p) => p.trim());
  const eq = pair!.indexOf("=");
  const attrs = new Map<string, string>();
  for (const a of rest) {
    const i = a.indexOf("=");
    attrs.set((i < 0 ? a : a.slice(0, i)).toLowerCase(), i < 0 ? "" : a.slice(i + 1));
  }
  return { name: pair!.slice(0, eq), value: pair!.slice(eq + 1), attrs };
}

function sessionSetCookie(res: ApiResponse): ReturnType<typeof parseSetCookie> {
  const headers = res.headers.getSetCookie().filter((h) => h.startsWith(COOKIE + "="));
  expect(headers).toHaveLength(1);
  return parseSetCookie(headers[0]!);
}

/** Every object key anywhere inside a JSON value. */
function allKeys(value: unknown): string[] {
  if (Array.isArray(value)) return value.flatMap(allKeys);
  if (value && typeof value === "object") return Object.entries(value).flatMap(([k, v]) => [k, ...allKeys(v)]);
  return [];
}

function expectError(res: ApiResponse, status: number) {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error).toBe("string");
  expect(res.body.error.length).toBeGreaterThan(0);
}

/** Creates an admin and returns its id and a client signed in as it. */
async function newAdmin(password = "admin-pass-" + seq): Promise<{ id: number; name: string; client: AdminClient; password: string }> {
  const name = uniqueName("admin");
  const id = await api.createUser(name, { role: "admin", password });
  const client = new AdminClient(server.adminUrl);
  const res = await client.login(name, password);
  expect(res.status).toBe(200);
  return { id, name, client, password };
}

describe("login", () => {
  test("answers 200 with the admin's id, username and role and sets the session cookie", async () => {
    const client = new AdminClient(server.adminUrl);
    const res = await client.login();
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ user: { id: 1, username: "admin", role: "admin" } });
    const cookie = sessionSetCookie(res);
    expect(cookie.name).toBe(COOKIE);
    expect(cookie.value.length).toBeGreaterThanOrEqual(32);
    expect((await client.get("/api/auth/me")).status).toBe(200);
  });

  test("sets a cookie that is HttpOnly, SameSite=Lax, Path=/ and not Secure over plain HTTP", async () => {
    const res = await new AdminClient(server.adminUrl).login();
    const { attrs } = sessionSetCookie(res);
    expect(attrs.has("httponly")).toBe(true);
    expect(attrs.get("samesite")).toBe("Lax");
    expect(attrs.get("path")).toBe("/");
    expect(attrs.has("secure")).toBe(false);
    expect(Number(attrs.get("max-age"))).toBeGreaterThan(0);
  });

  test("adds Secure to the cookie when the request came over HTTPS through a proxy", async () => {
    const res = await new AdminClient(server.adminUrl).call(
      "POST",
      "/api/auth/login",
      { username: "admin", password: ADMIN_PASSWORD },
      { "X-Forwarded-Proto": "https" },
    );
    expect(res.status).toBe(200);
    const { attrs } = sessionSetCookie(res);
    expect(attrs.has("secure")).toBe(true);
    expect(attrs.has("httponly")).toBe(true);
    expect(attrs.get("samesite")).toBe("Lax");
    expect(attrs.get("path")).toBe("/");
  });

  test("matches the username case-insensitively", async () => {
    const client = new AdminClient(server.adminUrl);
    const res = await client.login("ADMIN", ADMIN_PASSWORD);
    expect(res.status).toBe(200);
    expect(res.body.user).toEqual({ id: 1, username: "admin", role: "admin" });
    expect((await client.get("/api/auth/me")).body).toEqual({ id: 1, username: "admin", role: "admin" });
  });

  test("answers 401 without a cookie for a wrong password", async () => {
    const res = await new AdminClient(server.adminUrl).login("admin", ADMIN_PASSWORD + "x");
    expectError(res, 401);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  test("answers 401 for an unknown username, with the same message as for a wrong password", async () => {
    const unknown = await new AdminClient(server.adminUrl).login(uniqueName("nobody"), ADMIN_PASSWORD);
    expectError(unknown, 401);
    expect(unknown.headers.getSetCookie()).toEqual([]);
    const name = uniqueName("known");
    await api.createUser(name, { role: "admin", password: "known-password" });
    const wrong = await new AdminClient(server.adminUrl).login(name, "not-the-password");
    expectError(wrong, 401);
    expect(unknown.body.error).toBe(wrong.body.error);
  });

  test("answers 403 without a cookie to a user who is not an admin, even with the right password", async () => {
    const name = uniqueName("plain");
    await api.createUser(name, { password: "plain-password" });
    const res = await new AdminClient(server.adminUrl).login(name, "plain-password");
    expectError(res, 403);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  test("answers 401 to a disabled admin with the right password", async () => {
    const { id, name, password } = await newAdmin();
    expect((await api.put(`/api/users/${id}`, { enabled: false })).status).toBe(200);
    const res = await new AdminClient(server.adminUrl).login(name, password);
    expectError(res, 401);
    expect(res.headers.getSetCookie()).toEqual([]);
  });

  test.each([
    ["an empty object", {}, "username"],
    ["no password", { username: "admin" }, "password"],
    ["no username", { password: ADMIN_PASSWORD }, "username"],
    ["a numeric username", { username: 1, password: ADMIN_PASSWORD }, "username"],
    ["a null password", { username: "admin", password: null }, "password"],
    ["an array as password", { username: "admin", password: [ADMIN_PASSWORD] }, "password"],
  ])("answers 400 naming the field for %s", async (_label, body, field) => {
    const res = await new AdminClient(server.adminUrl).call("POST", "/api/auth/login", body);
    expectError(res, 400);
    expect(res.body.error).toContain(field);
  });
});

describe("the session", () => {
  test("/api/auth/me returns the id, username and role of the signed-in admin", async () => {
    const { id, name, client } = await newAdmin();
    const me = await client.get("/api/auth/me");
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ id, username: name, role: "admin" });
  });

  test.each([
    ["no cookie", undefined],
    ["an unknown session value", `${COOKIE}=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA`],
    ["an empty session value", `${COOKIE}=`],
    ["the right value under another cookie name", "other_cookie=VALUE"],
  ])("answers 401 with %s", async (_label, cookie) => {
    const value = cookie?.replace("VALUE", cookieValue(api));
    const res = await fetch(server.adminUrl + "/api/auth/me", { headers: value ? { Cookie: value } : {} });
    expect(res.status).toBe(401);
    const body = await res.json();
    expect(Object.keys(body as object)).toEqual(["error"]);
  });

  test.each([
    ["GET", "/api/auth/me"],
    ["POST", "/api/auth/logout"],
    ["GET", "/api/users"],
    ["POST", "/api/users"],
    ["GET", "/api/users/1"],
    ["PUT", "/api/users/1"],
    ["DELETE", "/api/users/1"],
    ["GET", "/api/users/1/tokens"],
    ["POST", "/api/users/1/tokens"],
    ["DELETE", "/api/tokens/1"],
    ["GET", "/api/domains"],
    ["POST", "/api/domains"],
    ["DELETE", "/api/domains/1"],
    ["GET", "/api/dashboard"],
    ["GET", "/api/tunnels/active"],
    ["GET", "/api/analytics/traffic"],
  ])("%s %s answers 401 without a session", async (method, path) => {
    const body = method === "POST" || method === "PUT" ? { username: "x", password: "password-123", enabled: false } : undefined;
    const res = await new AdminClient(server.adminUrl).call(method, path, body);
    expectError(res, 401);
  });

  test("an unauthenticated DELETE or PUT changes nothing", async () => {
    const anon = new AdminClient(server.adminUrl);
    expect((await anon.put("/api/users/1", { enabled: false, role: "user" })).status).toBe(401);
    expect((await anon.delete("/api/users/1")).status).toBe(401);
    const admin = await api.get("/api/users/1");
    expect(admin.body.user).toMatchObject({ id: 1, role: "admin", enabled: true });
  });

  test("is stored in the database only as the SHA-256 of the cookie value", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const raw = cookieValue(client);
    expect(sessionRow(client)).toMatchObject({ user_id: 1 });
    const plain = db.query("SELECT count(*) AS n FROM sessions WHERE id_hash = ?").get(raw) as { n: number };
    expect(plain.n).toBe(0);
  });

  test("two logins make two sessions, and logging out of one leaves the other valid", async () => {
    const a = new AdminClient(server.adminUrl);
    const b = new AdminClient(server.adminUrl);
    await a.login();
    await b.login();
    expect(a.cookie).not.toBe(b.cookie);
    expect((await a.post("/api/auth/logout")).status).toBe(200);
    expect((await a.get("/api/auth/me")).status).toBe(401);
    expect((await b.get("/api/auth/me")).status).toBe(200);
  });
});

describe("logout", () => {
  test("answers logged_out, deletes the session and clears the cookie", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    expect(sessionRow(client)).not.toBeNull();
    const res = await client.post("/api/auth/logout");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "logged_out" });
    const cleared = sessionSetCookie(res);
    expect(cleared.value).toBe("");
    expect(cleared.attrs.get("max-age")).toBe("0");
    expect(cleared.attrs.get("path")).toBe("/");
    expect(sessionRow(client)).toBeNull();
    // the old cookie, sent again, is worthless
    expectError(await client.get("/api/auth/me"), 401);
    expectError(await client.post("/api/auth/logout"), 401);
  });

  test("clears the cookie with Secure over HTTPS", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const res = await client.call("POST", "/api/auth/logout", undefined, { "X-Forwarded-Proto": "https" });
    expect(res.status).toBe(200);
    const cleared = sessionSetCookie(res);
    expect(cleared.attrs.get("max-age")).toBe("0");
    expect(cleared.attrs.has("secure")).toBe(true);
  });

  test("answers 401 without a session", async () => {
    expectError(await new AdminClient(server.adminUrl).post("/api/auth/logout"), 401);
  });
});

describe("session expiry", () => {
  test("a session idle for 25 hours answers 401 and is deleted", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    moveSession(client, { last_seen_at: new Date(Date.now() - 25 * HOUR_MS) });
    expectError(await client.get("/api/auth/me"), 401);
    expect(sessionRow(client)).toBeNull();
  });

  test("a session idle for 23 hours is still valid, and the request moves last_seen_at forward", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const idle = new Date(Date.now() - 23 * HOUR_MS);
    moveSession(client, { last_seen_at: idle });
    expect((await client.get("/api/auth/me")).status).toBe(200);
    expect(Date.parse(sessionRow(client)!.last_seen_at)).toBeGreaterThan(idle.getTime() + 22 * HOUR_MS);
    // and so it stays valid on the next request
    expect((await client.get("/api/auth/me")).status).toBe(200);
  });

  test("a session created 8 days ago answers 401 even though it was used a minute ago", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    moveSession(client, { created_at: new Date(Date.now() - 8 * 24 * HOUR_MS), last_seen_at: new Date(Date.now() - 60 * 1000) });
    expectError(await client.get("/api/users"), 401);
    expect(sessionRow(client)).toBeNull();
  });

  test("a session created 6 days ago and used recently is still valid", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    moveSession(client, { created_at: new Date(Date.now() - 6 * 24 * HOUR_MS), last_seen_at: new Date(Date.now() - HOUR_MS) });
    expect((await client.get("/api/users")).status).toBe(200);
  });

  test("an expired session does not come back after a fresh login of the same admin", async () => {
    const client = new AdminClient(server.adminUrl);
    await client.login();
    const oldCookie = client.cookie;
    moveSession(client, { last_seen_at: new Date(Date.now() - 25 * HOUR_MS) });
    expect((await client.get("/api/auth/me")).status).toBe(401);
    await client.login();
    expect(client.cookie).not.toBe(oldCookie);
    expect((await client.get("/api/auth/me")).status).toBe(200);
    const stale = await fetch(server.adminUrl + "/api/auth/me", { headers: { Cookie: oldCookie! } });
    expect(stale.status).toBe(401);
  });
});

describe("a session whose user changes", () => {
  test("answers 401 once its user is demoted to role user: a new role ends the user's admin sessions", async () => {
    const { id, client } = await newAdmin();
    expect((await api.put(`/api/users/${id}`, { role: "user" })).status).toBe(200);
    expectError(await client.get("/api/auth/me"), 401);
    expectError(await client.get("/api/users"), 401);
    expectError(await client.post("/api/users", { username: uniqueName("sneaky"), password: "password-123" }), 401);
    expectError(await client.put("/api/users/1", { enabled: false }), 401);
    expect((await api.get("/api/users/1")).body.user.enabled).toBe(true);
  });

  test("answers 401 once its user is disabled", async () => {
    const { id, client } = await newAdmin();
    expect((await api.put(`/api/users/${id}`, { enabled: false })).status).toBe(200);
    expectError(await client.get("/api/auth/me"), 401);
    expectError(await client.get("/api/users"), 401);
  });

  test("answers 401 once its user is deleted, and the session row is gone", async () => {
    const { id, client } = await newAdmin();
    expect(sessionRow(client)).not.toBeNull();
    expect((await api.delete(`/api/users/${id}`)).status).toBe(200);
    expectError(await client.get("/api/auth/me"), 401);
    expect(sessionRow(client)).toBeNull();
  });

  test("an admin can end their own admin rights: the same session then answers 401 (a new role ends admin sessions, the acting one too)", async () => {
    const { id, client } = await newAdmin();
    const res = await client.put(`/api/users/${id}`, { role: "user" });
    expect(res.status).toBe(200);
    expect(res.body.role).toBe("user");
    expectError(await client.get("/api/auth/me"), 401);
  });
});

describe("changing a password with PUT", () => {
  test("lets an admin sign in with the new password and not with the old one", async () => {
    const { id, name, password } = await newAdmin();
    const res = await api.put(`/api/users/${id}`, { password: "brand-new-secret" });
    expect(res.status).toBe(200);
    expectError(await new AdminClient(server.adminUrl).login(name, password), 401);
    const fresh = new AdminClient(server.adminUrl);
    expect((await fresh.login(name, "brand-new-secret")).status).toBe(200);
    expect((await fresh.get("/api/auth/me")).body).toEqual({ id, username: name, role: "admin" });
  });

  test("for a plain user, the old password answers 401 and the new one 403", async () => {
    const name = uniqueName("plainpw");
    const id = await api.createUser(name, { password: "old-password-1" });
    expect((await api.put(`/api/users/${id}`, { password: "new-password-2" })).status).toBe(200);
    expectError(await new AdminClient(server.adminUrl).login(name, "old-password-1"), 401);
    expectError(await new AdminClient(server.adminUrl).login(name, "new-password-2"), 403);
  });

  test("leaves the password unchanged when an update does not include it", async () => {
    const { id, name, password } = await newAdmin();
    expect((await api.put(`/api/users/${id}`, { max_tunnels: 3 })).status).toBe(200);
    expect((await new AdminClient(server.adminUrl).login(name, password)).status).toBe(200);
  });

  test("never puts a password in a response or in the server's log", async () => {
    const createPw = "Create-Pw-7f3a9c";
    const updatePw = "Update-Pw-2b8e1d";
    const name = uniqueName("secretive");
    const created = await api.call("POST", "/api/users", { username: name, password: createPw, role: "admin" });
    expect(created.status).toBe(201);
    const id = created.body.id;
    const responses: ApiResponse[] = [created];
    responses.push(await api.put(`/api/users/${id}`, { password: updatePw }));
    responses.push(await api.get(`/api/users/${id}`));
    responses.push(await api.get("/api/users"));
    const client = new AdminClient(server.adminUrl);
    responses.push(await client.login(name, updatePw));
    responses.push(await client.login(name, createPw)); // the old one: 401
    responses.push(await client.get("/api/auth/me"));
    for (const res of responses) {
      const text = JSON.stringify(res.body);
      expect(text).not.toContain(createPw);
      expect(text).not.toContain(updatePw);
      expect(text).not.toContain("$argon2");
      expect(allKeys(res.body).filter((k) => /password|hash/i.test(k))).toEqual([]);
      for (const [, value] of res.headers) {
        expect(value).not.toContain(createPw);
        expect(value).not.toContain(updatePw);
      }
    }
    const log = server.output.text();
    for (const secret of [createPw, updatePw, ADMIN_PASSWORD]) expect(log).not.toContain(secret);
  });
});

describe("login throttling", () => {
  test("five failures for one username lock it: the sixth attempt answers 429 with Retry-After, even with the right password", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    await admin.createUser("second", { role: "admin", password: "second-password" });
    const anon = new AdminClient(s.adminUrl);
    for (let i = 1; i <= 5; i++) expectError(await anon.login("admin", `wrong-${i}`), 401);

    const locked = await anon.login("admin", ADMIN_PASSWORD);
    expectError(locked, 429);
    expect(locked.headers.getSetCookie()).toEqual([]);
    const retryAfter = locked.headers.get("retry-after");
    expect(retryAfter).toMatch(/^[1-9][0-9]*$/);

    // the lock is on the username in any case, not only on the spelling used
    expectError(await anon.login("ADMIN", ADMIN_PASSWORD), 429);
    // and only on that username: another admin from the same address still signs in
    expect((await new AdminClient(s.adminUrl).login("second", "second-password")).status).toBe(200);
    // an existing session is not affected
    expect((await admin.get("/api/auth/me")).status).toBe(200);
  });

  test("a successful login before the allowance runs out starts the username's count again", async () => {
    await using s = await startServer();
    const anon = new AdminClient(s.adminUrl);
    for (let i = 0; i < 4; i++) expectError(await anon.login("admin", "wrong"), 401);
    expect((await anon.login("admin", ADMIN_PASSWORD)).status).toBe(200);
    for (let i = 0; i < 4; i++) expectError(await anon.login("admin", "wrong"), 401);
    expect((await anon.login("admin", ADMIN_PASSWORD)).status).toBe(200);
  });

  test("twenty failures from one address lock the address: then even the right admin password answers 429", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    const anon = new AdminClient(s.adminUrl);
    for (let i = 1; i <= 19; i++) expectError(await anon.login(`ghost${i}`, "whatever-password"), 401);
    // nineteen failures are within the allowance
    expect((await new AdminClient(s.adminUrl).login()).status).toBe(200);
    expectError(await anon.login("ghost20", "whatever-password"), 401);

    const locked = await new AdminClient(s.adminUrl).login();
    expectError(locked, 429);
    expect(locked.headers.get("retry-after")).toMatch(/^[1-9][0-9]*$/);
    expect(locked.headers.getSetCookie()).toEqual([]);
    // a forwarded-for header does not get around it
    const forwarded = await anon.call(
      "POST",
      "/api/auth/login",
      { username: "admin", password: ADMIN_PASSWORD },
      { "X-Forwarded-For": "203.0.113.7", "X-Real-IP": "203.0.113.7" },
    );
    expectError(forwarded, 429);
    // sessions made before the lock still work
    expect((await admin.get("/api/auth/me")).status).toBe(200);
  });
});
