/**
 * The portal's API on the server's domain itself, against the real server:
 * signing in (cookie attributes, disabled users, the shared throttle), a
 * user's own things only (devices, tunnels, traffic, password), and what
 * must never happen: another user's token revoked, a portal session used on
 * the admin API, the admin API on the public port, the portal on a
 * tunnel's name, a write from a tunnel's page, a cookie planted by a
 * tunnel, a connection to the apex reused for another name.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { PortalClient, portalAs } from "../harness/portal.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let admin: AdminClient;
let aliceId: number;
let bobId: number;
let upstream: ReturnType<typeof Bun.serve>;

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  aliceId = await admin.createUser("alice", { max_devices: 3 });
  bobId = await admin.createUser("bob");
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream saw ${new URL(req.url).pathname}`) });
});

afterAll(async () => {
  upstream?.stop(true);
  await server?.stop();
});

describe("signing in", () => {
  test("a wrong password is 401; the right one sets a host-only, HttpOnly, SameSite=Lax session cookie (plain HTTP: not Secure, no __Host-)", async () => {
    const portal = new PortalClient(server.edgePort);
    const wrong = await portal.login("alice", "not-the-password");
    expect(wrong.status).toBe(401);
    expect(wrong.body).toEqual({ error: "invalid username or password" });
    const ok = await portal.login("alice");
    expect(ok.status).toBe(200);
    expect(ok.body).toEqual({ user: { id: aliceId, username: "alice" } });
    const cookie = ok.headers.get("set-cookie")!;
    expect(cookie).toMatch(/^burrow_portal=[A-Za-z0-9_-]{40,}; /);
    expect(cookie).toContain("Path=/");
    expect(cookie).toContain("HttpOnly");
    expect(cookie).toContain("SameSite=Lax");
    expect(cookie).not.toMatch(/Domain=/i);
    expect(cookie).not.toMatch(/Secure/i);
    const me = await portal.get("/_burrow/api/me");
    expect(me.status).toBe(200);
    expect(me.body.user.username).toBe("alice");
    expect(me.body.user.max_devices).toBe(3);
    expect(me.body.user.has_password).toBe(true);
    expect(me.body.traffic_used).toBe(0);
    expect(me.body.user.password_hash).toBeUndefined();
  });

  test("a disabled user cannot sign in, and their session ends", async () => {
    const id = await admin.createUser("carol");
    const portal = await portalAs(server.edgePort, "carol");
    expect((await admin.put(`/api/users/${id}`, { enabled: false })).status).toBe(200);
    expect((await portal.get("/_burrow/api/me")).status).toBe(401);
    const again = await new PortalClient(server.edgePort).login("carol");
    expect(again.status).toBe(401);
    expect(again.body.error).toBe("the account is disabled");
  });

  test("signing out ends the session and clears the cookie", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const kept = portal.cookie;
    const out = await portal.post("/_burrow/api/logout");
    expect(out.status).toBe(200);
    expect(out.body).toEqual({ status: "logged_out" });
    expect(out.headers.get("set-cookie")).toContain("Max-Age=0");
    portal.cookie = kept;
    expect((await portal.get("/_burrow/api/me")).status).toBe(401);
  });

  test("sign-in is audited with the user as actor", async () => {
    await portalAs(server.edgePort, "bob");
    const audit = await admin.get("/api/audit?action=portal.login");
    const entry = audit.body.find((e: any) => e.username === "bob" && e.outcome === "ok");
    expect(entry).toBeDefined();
    expect(entry.user_id).toBe(bobId);
    expect(entry.details).toEqual({ via: "portal" });
  });
});

describe("a user's own things", () => {
  test("devices: add (the token and its login line, once), list, revoke; max_devices counts the enabled ones", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const made = await portal.post("/_burrow/api/me/tokens", { device_name: "  laptop  " });
    expect(made.status).toBe(201);
    expect(made.body.token).toMatch(/^brw_/);
    expect(made.body.device_name).toBe("laptop");
    expect(made.body.command).toBe(`burrow login --server http://localhost:${server.edgePort} --token ${made.body.token}`);
    const list = await portal.get("/_burrow/api/me/tokens");
    expect(list.status).toBe(200);
    expect(list.body.map((t: any) => t.device_name)).toContain("laptop");
    expect(JSON.stringify(list.body)).not.toContain(made.body.token);
    // three at most: two more fit, the fourth does not
    expect((await portal.post("/_burrow/api/me/tokens", { device_name: "desk" })).status).toBe(201);
    expect((await portal.post("/_burrow/api/me/tokens", { device_name: "phone" })).status).toBe(201);
    const over = await portal.post("/_burrow/api/me/tokens", { device_name: "one-too-many" });
    expect(over.status).toBe(409);
    expect(over.body.error).toContain("3 of your 3 devices");
    // revoking one makes room
    expect((await portal.delete(`/_burrow/api/me/tokens/${made.body.token_id}`)).status).toBe(200);
    expect((await portal.post("/_burrow/api/me/tokens", { device_name: "replacement" })).status).toBe(201);
    for (const t of (await portal.get("/_burrow/api/me/tokens")).body) if (t.enabled) await portal.delete(`/_burrow/api/me/tokens/${t.id}`);
  });

  test("another user's token id is 404 and stays enabled; a token id that is not a number is 400", async () => {
    const bobToken = await admin.post(`/api/users/${bobId}/tokens`, { device_name: "bob's laptop" });
    const portal = await portalAs(server.edgePort, "alice");
    const res = await portal.delete(`/_burrow/api/me/tokens/${bobToken.body.token_id}`);
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: "token not found" });
    const bobs = await admin.get(`/api/users/${bobId}/tokens`);
    expect(bobs.body.find((t: any) => t.id === bobToken.body.token_id).enabled).toBe(true);
    expect((await portal.delete("/_burrow/api/me/tokens/abc")).status).toBe(400);
    expect((await portal.delete("/_burrow/api/me/tokens/999999")).status).toBe(404);
  });

  test("live tunnels: the user's own, with their address and device; revoking the device closes its tunnel", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const made = await portal.post("/_burrow/api/me/tokens", { device_name: "workstation" });
    const bobToken = await admin.createToken(bobId, "bob-box");
    await using mine = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: made.body.token, args: ["--subdomain", "alice-app"] });
    await using _bobs = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: bobToken, args: ["--subdomain", "bob-app"] });
    const tunnels = await portal.get("/_burrow/api/me/tunnels");
    expect(tunnels.status).toBe(200);
    expect(tunnels.body).toHaveLength(1);
    expect(tunnels.body[0]).toMatchObject({ subdomain: "alice-app", protocol: "http", url: `http://alice-app.localhost:${server.edgePort}`, device_name: "workstation", token_id: made.body.token_id });
    expect((await portal.delete(`/_burrow/api/me/tokens/${made.body.token_id}`)).status).toBe(200);
    await waitUntil(() => mine.output.text().includes("TOKEN_DISABLED"), 5_000, "the agent told its token was revoked");
    await waitUntil(async () => (await portal.get("/_burrow/api/me/tunnels")).body.length === 0, 5_000, "the tunnel gone from the list");
    const audit = await admin.get("/api/audit?action=token.revoke");
    expect(audit.body.find((e: any) => e.target === `token:${made.body.token_id}`)).toMatchObject({ username: "alice", outcome: "ok", details: { via: "portal", device_name: "workstation" } });
  });

  test("private tunnels: the owner's list shows one with its shares; what is shared with a user, online or not, with the command that reaches it", async () => {
    const alice = await portalAs(server.edgePort, "alice");
    const bob = await portalAs(server.edgePort, "bob");
    expect((await bob.get("/_burrow/api/me/shared")).body).toEqual([]);
    const aliceToken = await admin.createToken(aliceId, "alice-private");
    const agent = await startAgent({ kind: "tcp", target: upstream.port!, server: server.edgeUrl, token: aliceToken, args: ["--private", "--name", "db", "--share", "bob"] });
    try {
      const mine = (await alice.get("/_burrow/api/me/tunnels")).body;
      expect(mine.find((t: any) => t.private)).toMatchObject({ protocol: "tcp", url: "alice/db", private: { target: "alice/db", shares: ["bob"], connected: 0 }, device_name: "alice-private" });
      expect((await bob.get("/_burrow/api/me/shared")).body).toEqual([{ target: "alice/db", protocol: "tcp", online: true, command: "burrow connect alice/db" }]);
      // alice's own is not "shared with" her; nobody else's list has it
      expect((await alice.get("/_burrow/api/me/shared")).body).toEqual([]);
    } finally {
      await agent.stop();
    }
    await waitUntil(async () => (await bob.get("/_burrow/api/me/shared")).body[0]?.online === false, 5_000, "alice/db offline in bob's list");
  });

  test("traffic: one record a day for the days asked (30 by default); a bad days is 400", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const days = await portal.get("/_burrow/api/me/traffic?days=7");
    expect(days.status).toBe(200);
    expect(days.body).toHaveLength(7);
    expect(days.body[0]).toMatchObject({ user_id: aliceId, bytes_in: 0, bytes_out: 0, total: 0 });
    expect((await portal.get("/_burrow/api/me/traffic")).body).toHaveLength(30);
    for (const bad of ["0", "366", "abc", "-1", "1e3"]) {
      const res = await portal.get(`/_burrow/api/me/traffic?days=${bad}`);
      expect(res.status).toBe(400);
      expect(res.body.error).toContain("days");
    }
  });

  test("reserved subdomains and hostnames: the user's own only", async () => {
    expect((await admin.post("/api/domains", { subdomain: "alices", user_id: aliceId })).status).toBe(201);
    expect((await admin.post("/api/domains", { subdomain: "bobs", user_id: bobId })).status).toBe(201);
    const portal = await portalAs(server.edgePort, "alice");
    const domains = await portal.get("/_burrow/api/me/domains");
    expect(domains.body.map((d: any) => d.subdomain)).toEqual(["alices"]);
    expect((await portal.get("/_burrow/api/me/hostnames")).body).toEqual([]);
  });

  test("changing the password: the current one must be right; other sessions end, this one stays", async () => {
    await admin.createUser("dave");
    const here = await portalAs(server.edgePort, "dave");
    const elsewhere = await portalAs(server.edgePort, "dave");
    const wrong = await here.put("/_burrow/api/me/password", { current_password: "nope-nope", new_password: "a-new-password" });
    expect(wrong.status).toBe(403);
    expect(wrong.body.error).toBe("the current password is wrong");
    const short = await here.put("/_burrow/api/me/password", { current_password: "password-123", new_password: "short" });
    expect(short.status).toBe(400);
    expect(short.body.error).toContain("new_password");
    const ok = await here.put("/_burrow/api/me/password", { current_password: "password-123", new_password: "a-new-password" });
    expect(ok.status).toBe(200);
    expect((await here.get("/_burrow/api/me")).status).toBe(200);
    expect((await elsewhere.get("/_burrow/api/me")).status).toBe(401);
    expect((await new PortalClient(server.edgePort).login("dave")).status).toBe(401);
    expect((await new PortalClient(server.edgePort).login("dave", "a-new-password")).status).toBe(200);
  });
});

describe("never the admin's power, never another place's", () => {
  test("a portal session is no session on the admin API, even an admin's", async () => {
    const portal = await portalAs(server.edgePort, "admin", "correct-horse-battery");
    const key = portal.cookie!.split("=")[1];
    const res = await fetch(`${server.adminUrl}/api/users`, { headers: { Cookie: `tunnel_admin_session=${key}` } });
    expect(res.status).toBe(401);
    // nor is the portal's cookie name read there
    expect((await fetch(`${server.adminUrl}/api/users`, { headers: { Cookie: portal.cookie! } })).status).toBe(401);
  });

  test("an admin session's key is no session on the portal", async () => {
    const key = admin.cookie!.split("=")[1];
    const portal = new PortalClient(server.edgePort);
    portal.cookie = `burrow_portal=${key}`;
    expect((await portal.get("/_burrow/api/me")).status).toBe(401);
  });

  test("the admin API's paths on the public port are 404", async () => {
    const portal = await portalAs(server.edgePort, "admin", "correct-horse-battery");
    for (const path of ["/api/users", "/api/auth/me", "/api/openapi.json", "/metrics", "/_burrow/api/users"]) {
      const res = await portal.get(path);
      expect(res.status).toBe(404);
    }
    const create = await portal.post("/api/users", { username: "mallory", password: "password-123" });
    expect(create.status).toBe(405);
    expect((await admin.get("/api/users")).body.map((u: any) => u.username)).not.toContain("mallory");
  });

  test("the portal's paths on a tunnel's name go to the tunnel, and on an unknown name to the 404 page", async () => {
    const token = await admin.createToken(bobId, "tunnel");
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "portal-lookalike"] });
    const viaTunnel = await fetch(`http://127.0.0.1:${server.edgePort}/_burrow/api/me`, { headers: { host: `portal-lookalike.localhost:${server.edgePort}` } });
    expect(await viaTunnel.text()).toBe("upstream saw /_burrow/api/me");
    const unknown = await fetch(`http://127.0.0.1:${server.edgePort}/_burrow/api/login`, { method: "POST", headers: { host: `nobody.localhost:${server.edgePort}` }, body: "{}" });
    expect(unknown.status).toBe(404);
    expect(await unknown.text()).not.toContain("username");
  });

  test("a write from a tunnel's page (same site, another origin) is refused; from the portal's own page it passes", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const fromTunnel = await portal.call("POST", "/_burrow/api/me/tokens", { device_name: "planted" }, { Origin: `http://evil.localhost:${server.edgePort}`, "Sec-Fetch-Site": "same-site" });
    expect(fromTunnel.status).toBe(403);
    expect(fromTunnel.body).toEqual({ error: "cross-site request refused" });
    const crossSite = await portal.call("DELETE", "/_burrow/api/me/tokens/1", undefined, { "Sec-Fetch-Site": "cross-site" });
    expect(crossSite.status).toBe(403);
    const loginFromTunnel = await new PortalClient(server.edgePort).call("POST", "/_burrow/api/login", { username: "alice", password: "password-123" }, { Origin: `http://evil.localhost:${server.edgePort}` });
    expect(loginFromTunnel.status).toBe(403);
    expect(loginFromTunnel.headers.get("set-cookie")).toBeNull();
    const own = await portal.call("POST", "/_burrow/api/me/tokens", { device_name: "own-page" }, { Origin: portal.origin, "Sec-Fetch-Site": "same-origin" });
    expect(own.status).toBe(201);
    await portal.delete(`/_burrow/api/me/tokens/${own.body.token_id}`);
  });

  test("a second session cookie of the name (planted by a tunnel for the parent domain) signs the request out and clears both", async () => {
    const victim = await portalAs(server.edgePort, "alice");
    const attacker = await portalAs(server.edgePort, "bob");
    victim.cookie = `${attacker.cookie}; ${victim.cookie}`;
    const res = await victim.get("/_burrow/api/me");
    expect(res.status).toBe(401);
    const cleared = res.headers.getSetCookie();
    expect(cleared).toHaveLength(2);
    expect(cleared.every((c) => c.startsWith("burrow_portal=;") && c.includes("Max-Age=0"))).toBe(true);
    expect(cleared.some((c) => c.includes("Domain=localhost"))).toBe(true);
  });

  test("a script's request (no Sec-Fetch-Mode) closes its connection after the answer: its next may be for another name", async () => {
    const both = `GET /_burrow/api/me HTTP/1.1\r\nHost: localhost:${server.edgePort}\r\n\r\nGET /secret HTTP/1.1\r\nHost: demo.localhost:${server.edgePort}\r\n\r\n`;
    const reply = await rawHttp(server.edgePort, both);
    expect(reply.status).toBe(401);
    expect(reply.head.toLowerCase()).toContain("connection: close");
    expect(reply.body).not.toContain("HTTP/1.1");
    expect(reply.closed).toBe(true);
  });

  test("a browser's connection to the apex that asks for another name is 421 and closed", async () => {
    const both = `GET /_burrow/api/me HTTP/1.1\r\nHost: localhost:${server.edgePort}\r\nSec-Fetch-Mode: cors\r\n\r\nGET /secret HTTP/1.1\r\nHost: demo.localhost:${server.edgePort}\r\n\r\n`;
    const reply = await rawHttp(server.edgePort, both);
    expect(reply.status).toBe(401);
    expect(reply.body).toContain("HTTP/1.1 421");
    expect(reply.body).toContain("this connection is the portal's");
    expect(reply.closed).toBe(true);
  });

  test("through a trusted proxy (which pools connections over every name) each portal answer closes its connection", async () => {
    await using proxied = await startServer({ args: ["--trusted-proxies", "127.0.0.1/32"] });
    const both = `GET /_burrow/api/me HTTP/1.1\r\nHost: localhost:${proxied.edgePort}\r\nX-Forwarded-For: 203.0.113.7\r\nSec-Fetch-Mode: cors\r\n\r\nGET /next HTTP/1.1\r\nHost: demo.localhost:${proxied.edgePort}\r\n\r\n`;
    const reply = await rawHttp(proxied.edgePort, both);
    expect(reply.status).toBe(401);
    expect(reply.head.toLowerCase()).toContain("connection: close");
    expect(reply.body).not.toContain("HTTP/1.1");
    expect(reply.closed).toBe(true);
  });

  test("every answer forbids framing and carries the page's policy", async () => {
    const page = await new PortalClient(server.edgePort).get("/");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
    expect(page.headers.get("x-frame-options")).toBe("DENY");
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    const api = await new PortalClient(server.edgePort).get("/_burrow/api/me");
    expect(api.headers.get("x-frame-options")).toBe("DENY");
  });
});

describe("bad input", () => {
  test("every endpoint answers bad bodies, methods and paths with a clear 4xx, never a 500", async () => {
    const portal = await portalAs(server.edgePort, "alice");
    const cases: [string, string, unknown, number][] = [
      ["POST", "/_burrow/api/login", "not json", 400],
      ["POST", "/_burrow/api/login", "[]", 400],
      ["POST", "/_burrow/api/login", { username: "alice" }, 400],
      ["POST", "/_burrow/api/login", { username: 5, password: "x" }, 400],
      ["POST", "/_burrow/api/login", { username: "x".repeat(300), password: "x" }, 400],
      ["POST", "/_burrow/api/me/tokens", {}, 400],
      ["POST", "/_burrow/api/me/tokens", { device_name: "" }, 400],
      ["POST", "/_burrow/api/me/tokens", { device_name: "x".repeat(101) }, 400],
      ["POST", "/_burrow/api/me/tokens", { device_name: ["a"] }, 400],
      ["PUT", "/_burrow/api/me/password", "{", 400],
      ["PUT", "/_burrow/api/me/password", { current_password: 1, new_password: 2 }, 400],
      ["GET", "/_burrow/api/me/tokens/1", undefined, 405],
      ["PUT", "/_burrow/api/me", {}, 405],
      ["GET", "/_burrow/api/nothing", undefined, 404],
      ["POST", "/_burrow/device/code", { device_name: "x".repeat(101) }, 400],
      ["POST", "/_burrow/device/code", "nope", 400],
      ["GET", "/_burrow/device/code", undefined, 405],
      ["GET", "/_burrow/api/device?user_code=" + "A".repeat(40), undefined, 400],
      ["POST", "/_burrow/api/device/approve", {}, 400],
      ["POST", "/_burrow/api/device/deny", { user_code: 12345678 }, 400],
      ["DELETE", "/", undefined, 405],
    ];
    for (const [method, path, body, status] of cases) {
      const res = await portal.call(method, path, body);
      if (res.status !== status) throw new Error(`${method} ${path} ${JSON.stringify(body)?.slice(0, 40)}: ${res.status} ${JSON.stringify(res.body)}`);
      if (path.startsWith("/_burrow/")) expect(typeof res.body.error).toBe("string");
    }
    const tooBig = await portal.call("POST", "/_burrow/api/me/tokens", JSON.stringify({ device_name: "x".repeat(1_100_000) }));
    expect([413]).toContain(tooBig.status);
    expect((await portal.get("/_burrow/api/me")).status).toBe(200);
  });

  test("device token polls with bad bodies answer as RFC 8628 says (invalid_request), unknown codes invalid_grant", async () => {
    const portal = new PortalClient(server.edgePort);
    const none = await portal.post("/_burrow/device/token", {});
    expect(none.status).toBe(400);
    expect(none.body.error).toBe("invalid_request");
    const junk = await portal.post("/_burrow/device/token", "garbage");
    expect(junk.body.error).toBe("invalid_request");
    const unknown = await portal.post("/_burrow/device/token", { device_code: "never-given" });
    expect(unknown.status).toBe(400);
    expect(unknown.body.error).toBe("invalid_grant");
  });
});

describe("--portal off", () => {
  test("the domain shows the plain page; the portal's API and the device login are not there", async () => {
    await using off = await startServer({ args: ["--portal", "off"] });
    const portal = new PortalClient(off.edgePort);
    const page = await portal.get("/");
    expect(page.status).toBe(404);
    expect(String(page.body)).toContain("burrow tunnel server");
    expect((await portal.post("/_burrow/api/login", { username: "admin", password: "correct-horse-battery" })).status).toBe(404);
    expect((await portal.post("/_burrow/device/code", { device_name: "x" })).status).toBe(404);
  });
});
