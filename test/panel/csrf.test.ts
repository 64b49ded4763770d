/**
 * The cross-site refusal on state-changing admin requests, against the real
 * server: browsers naming another site are refused, the panel's own requests
 * and scripts that say nothing (curl) pass.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
const REFUSED = { error: "cross-site request refused" };

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
});
afterAll(() => server?.stop());

/** A raw request with the session cookie and exactly these headers (no body unless given). */
function send(method: string, path: string, headers: Record<string, string>, body?: unknown) {
  return fetch(server.adminUrl + path, {
    method,
    headers: { Cookie: api.cookie!, ...(body === undefined ? {} : { "Content-Type": "application/json" }), ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
}

describe("refused: a browser request from another site", () => {
  test("Sec-Fetch-Site: cross-site is refused with 403 and changes nothing", async () => {
    const id = await api.createUser("victim-1");
    const res = await send("DELETE", `/api/users/${id}`, { "Sec-Fetch-Site": "cross-site" });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual(REFUSED);
    expect((await api.get(`/api/users/${id}`)).status).toBe(200);
  });

  test("an Origin naming another host is refused, even when Sec-Fetch-Site is absent", async () => {
    const res = await send("POST", "/api/users", { Origin: "https://evil.example" }, { username: "mallory", password: "password-123" });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual(REFUSED);
    expect((await api.get("/api/users")).body.some((u: { username: string }) => u.username === "mallory")).toBe(false);
  });

  test("a same-site page (a tunnel on a sibling subdomain) is refused by its Origin", async () => {
    const id = await api.createUser("victim-2");
    const res = await send("PUT", `/api/users/${id}`, { "Sec-Fetch-Site": "same-site", Origin: `http://evil.localhost:${server.edgePort}` }, { enabled: false });
    expect(res.status).toBe(403);
    expect((await api.get(`/api/users/${id}`)).body.user.enabled).toBe(true);
  });

  test("the same host on another port is another origin, and refused", async () => {
    const other = new URL(server.adminUrl);
    other.port = String(Number(other.port) === 65535 ? 1 : Number(other.port) + 1);
    const res = await send("POST", "/api/auth/logout", { Origin: other.origin });
    expect(res.status).toBe(403);
    expect((await api.get("/api/auth/me")).status).toBe(200);
  });

  test("Origin: null (a sandboxed frame, a file) is refused", async () => {
    const res = await send("POST", "/api/domains", { Origin: "null" }, { subdomain: "nullorigin", user_id: 1 });
    expect(res.status).toBe(403);
    expect(await res.json()).toEqual(REFUSED);
  });

  test("login is guarded too: a cross-site page cannot sign a browser in", async () => {
    const res = await fetch(server.adminUrl + "/api/auth/login", {
      method: "POST",
      headers: { "Content-Type": "application/json", Origin: "https://evil.example", "Sec-Fetch-Site": "cross-site" },
      body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }),
    });
    expect(res.status).toBe(403);
    expect(res.headers.get("set-cookie")).toBeNull();
  });
});

describe("allowed", () => {
  test("curl -X DELETE -b jar: no body, no Origin, no Sec-Fetch-Site", async () => {
    const id = await api.createUser("scripted-delete");
    const res = await send("DELETE", `/api/users/${id}`, {});
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: "deleted" });
  });

  test.skipIf(!Bun.which("curl"))("the real curl, with a cookie jar from its own login: -X DELETE -b jar", async () => {
    const id = await api.createUser("curl-delete");
    const jar = join(mkdtempSync(join(tmpdir(), "burrow-jar-")), "jar");
    const curl = (...args: string[]) => Bun.spawnSync(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", ...args], { stdout: "pipe" }).stdout.toString();
    const login = JSON.stringify({ username: "admin", password: ADMIN_PASSWORD });
    expect(curl("-c", jar, "-d", login, `${server.adminUrl}/api/auth/login`)).toBe("200");
    expect(curl("-X", "DELETE", "-b", jar, `${server.adminUrl}/api/users/${id}`)).toBe("200");
    rmSync(dirname(jar), { recursive: true, force: true });
    expect((await api.get(`/api/users/${id}`)).status).toBe(404);
  });

  test("the panel's own requests: same Origin as the Host, Sec-Fetch-Site same-origin", async () => {
    const res = await send("POST", "/api/users", { Origin: server.adminUrl, "Sec-Fetch-Site": "same-origin" }, { username: "from-panel", password: "password-123" });
    expect(res.status).toBe(201);
  });

  test("an Origin that differs only in letter case is the same origin", async () => {
    const res = await send("POST", "/api/users", { Origin: server.adminUrl.toUpperCase().replace("HTTP://", "http://") }, { username: "case-origin", password: "password-123" });
    expect(res.status).toBe(201);
  });

  test("Sec-Fetch-Site: none (typed or bookmarked by the person) passes", async () => {
    const res = await send("POST", "/api/users", { "Sec-Fetch-Site": "none" }, { username: "typed", password: "password-123" });
    expect(res.status).toBe(201);
  });

  test("behind a proxy that rewrites Host, an Origin matching X-Forwarded-Host passes", async () => {
    const res = await send(
      "POST",
      "/api/users",
      { Origin: "https://admin.example.com", "X-Forwarded-Host": "admin.example.com", "Sec-Fetch-Site": "same-origin" },
      { username: "proxied", password: "password-123" },
    );
    expect(res.status).toBe(201);
  });

  test("reads are not state-changing and are not refused (the browser keeps their answers from other sites)", async () => {
    const res = await send("GET", "/api/auth/me", { Origin: "https://evil.example", "Sec-Fetch-Site": "cross-site" });
    expect(res.status).toBe(200);
    expect(res.headers.get("access-control-allow-origin")).toBeNull();
  });
});

describe("GET /api/server", () => {
  test("tells a signed-in admin where the public side is", async () => {
    const res = await api.get("/api/server");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ domain: "localhost", edge_url: `http://localhost:${server.edgePort}`, tcp_host: "localhost" });
  });

  test("needs the session like every other endpoint", async () => {
    const res = await fetch(server.adminUrl + "/api/server");
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: expect.any(String) });
  });

  test("is read-only: other methods are 405", async () => {
    const res = await api.post("/api/server", {});
    expect(res.status).toBe(405);
    expect(res.headers.get("allow")).toBe("GET");
  });
});
