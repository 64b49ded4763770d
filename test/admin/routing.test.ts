/**
 * How the admin API routes a request before any endpoint logic: unknown
 * paths (404), known paths with the wrong method (405 + Allow), ids that are
 * not positive integers (400), bodies over 1 MiB (413) and requests without
 * a session (401) — always with the body {"error": "<message>"}.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let anonymous: AdminClient;
let userId: number;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  anonymous = new AdminClient(server.adminUrl);
  userId = await api.createUser("routing-user");
}, 30_000);
afterAll(() => server?.stop());

const MiB = 1024 * 1024;

/** Every endpoint of the API, with a concrete path and the methods it has. */
const ENDPOINTS: { path: string; methods: string[]; public?: boolean }[] = [
  { path: "/api/auth/login", methods: ["POST"], public: true },
  { path: "/api/auth/logout", methods: ["POST"] },
  { path: "/api/auth/me", methods: ["GET"] },
  { path: "/api/users", methods: ["GET", "POST"] },
  { path: "/api/users/1", methods: ["GET", "PUT", "DELETE"] },
  { path: "/api/users/1/tokens", methods: ["GET", "POST"] },
  { path: "/api/tokens/1", methods: ["DELETE"] },
  { path: "/api/domains", methods: ["GET", "POST"] },
  { path: "/api/domains/1", methods: ["DELETE"] },
  { path: "/api/dashboard", methods: ["GET"] },
  { path: "/api/tunnels/active", methods: ["GET"] },
  { path: "/api/analytics/traffic", methods: ["GET"] },
];
const ALL_METHODS = ["GET", "POST", "PUT", "DELETE", "PATCH"];

/** The body must be exactly {"error": "<non-empty message>"}, sent as JSON. */
function expectErrorBody(res: { status: number; body: unknown; headers: Headers }, status: number) {
  expect(res.status).toBe(status);
  expect(res.headers.get("content-type") ?? "").toContain("application/json");
  expect(res.body).toBeObject();
  expect(Object.keys(res.body as object)).toEqual(["error"]);
  const message = (res.body as { error: unknown }).error;
  expect(typeof message).toBe("string");
  expect((message as string).length).toBeGreaterThan(0);
}

describe("an unknown path", () => {
  const unknown = [
    "/api/nope",
    "/api",
    "/api/",
    "/api/user",
    "/api/users/1/tokens/1",
    "/api/users/1/sessions",
    "/api/tokens",
    "/api/analytics",
    "/api/auth",
    "/api/dashboard/extra",
    "/API/users",
  ];

  test("answers 404 with an error body, signed in", async () => {
    for (const path of unknown) {
      for (const method of ["GET", "POST", "DELETE"]) {
        const res = await api.call(method, path);
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
        expectErrorBody(res, 404);
      }
    }
  });

  test("answers 404 with an error body without a session too", async () => {
    for (const path of unknown) {
      const res = await anonymous.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      expectErrorBody(res, 404);
    }
  });
});

describe("a known path with a method it does not have", () => {
  test("answers 405 with an Allow header listing the path's methods", async () => {
    for (const { path, methods } of ENDPOINTS) {
      for (const method of ALL_METHODS.filter((m) => !methods.includes(m))) {
        const res = await api.call(method, path, method === "GET" || method === "DELETE" ? undefined : {});
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 405 });
        expectErrorBody(res, 405);
        const allow = (res.headers.get("allow") ?? "").split(",").map((m) => m.trim().toUpperCase());
        for (const m of methods) expect({ method, path, allow: allow.includes(m) }).toEqual({ method, path, allow: true });
        expect(allow).not.toContain(method);
      }
    }
  });

  test("PATCH /api/users/:id answers 405 with Allow GET, PUT, DELETE", async () => {
    const res = await api.call("PATCH", `/api/users/${userId}`, { enabled: false });
    expectErrorBody(res, 405);
    const allow = (res.headers.get("allow") ?? "").split(",").map((m) => m.trim());
    expect(allow).toEqual(expect.arrayContaining(["GET", "PUT", "DELETE"]));
    expect(allow).not.toContain("PATCH");
    expect(allow).not.toContain("POST");
    // and nothing changed
    expect((await api.get(`/api/users/${userId}`)).body.user.enabled).toBe(true);
  });

  test("answers 405 even when the id in the path does not exist", async () => {
    const res = await api.call("PUT", "/api/tokens/424242", {});
    expectErrorBody(res, 405);
    expect(res.headers.get("allow")).toContain("DELETE");
  });
});

describe("an :id that is not a positive integer", () => {
  const badIds = ["abc", "1.5", "-1", "99999999999999999999", "1e3", "0x10", "%20"];
  const routes = [
    ["GET", "/api/users/:id"],
    ["PUT", "/api/users/:id"],
    ["DELETE", "/api/users/:id"],
    ["GET", "/api/users/:id/tokens"],
    ["POST", "/api/users/:id/tokens"],
    ["DELETE", "/api/tokens/:id"],
    ["DELETE", "/api/domains/:id"],
  ] as const;

  test("answers 400 with a message naming id, on every route that takes one", async () => {
    for (const [method, pattern] of routes) {
      for (const id of badIds) {
        const path = pattern.replace(":id", id);
        const body = method === "PUT" ? { enabled: true } : method === "POST" ? { device_name: "x" } : undefined;
        const res = await api.call(method, path, body);
        expect({ method, path, status: res.status }).toEqual({ method, path, status: 400 });
        expectErrorBody(res, 400);
        expect((res.body as { error: string }).error).toContain("id");
      }
    }
  });

  test("leaves the data alone: a bad id on DELETE deletes nobody", async () => {
    const before = (await api.get("/api/users")).body;
    for (const id of badIds) await api.delete(`/api/users/${id}`);
    expect((await api.get("/api/users")).body).toEqual(before);
  });

  test("is told apart from an integer id that does not exist, which answers 404", async () => {
    expectErrorBody(await api.get("/api/users/999999"), 404);
    expectErrorBody(await api.delete("/api/tokens/999999"), 404);
    expectErrorBody(await api.delete("/api/domains/999999"), 404);
  });
});

describe("a body over 1 MiB", () => {
  test("answers 413 when Content-Length says so", async () => {
    const body = JSON.stringify({ device_name: "x".repeat(MiB) });
    const res = await api.call("POST", `/api/users/${userId}/tokens`, body);
    expectErrorBody(res, 413);
    expect((await api.get(`/api/users/${userId}/tokens`)).body).toEqual([]);
  });

  test("answers 413 when the body is streamed without a Content-Length", async () => {
    const chunk = new TextEncoder().encode(" ".repeat(64 * 1024));
    let sent = 0;
    const stream = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent === 0) controller.enqueue(new TextEncoder().encode('{"username":"streamed","password":"password-123"'));
        if (sent >= 20) {
          controller.enqueue(new TextEncoder().encode("}"));
          controller.close();
          return;
        }
        controller.enqueue(chunk);
        sent++;
      },
    });
    const res = await fetch(server.adminUrl + "/api/users", {
      method: "POST",
      headers: { Cookie: api.cookie!, "Content-Type": "application/json" },
      body: stream,
      duplex: "half",
    } as RequestInit);
    const parsed = { status: res.status, body: await res.json(), headers: res.headers };
    expectErrorBody(parsed, 413);
    const names = (await api.get("/api/users")).body.map((u: { username: string }) => u.username);
    expect(names).not.toContain("streamed");
  });

  test("answers 413 on login too, before any session exists", async () => {
    const res = await anonymous.call("POST", "/api/auth/login", JSON.stringify({ username: "admin", password: "p".repeat(MiB + 10) }));
    expectErrorBody(res, 413);
  });

  test("starts at 1 MiB + 1 byte: a body of exactly 1 MiB is still read", async () => {
    const base = JSON.stringify({ device_name: "exactly-one-mib" });
    const exact = base + " ".repeat(MiB - base.length);
    expect(new TextEncoder().encode(exact).byteLength).toBe(MiB);
    const ok = await api.call("POST", `/api/users/${userId}/tokens`, exact);
    expect(ok.status).toBe(201);
    const over = await api.call("POST", `/api/users/${userId}/tokens`, exact + " ");
    expectErrorBody(over, 413);
    const names = (await api.get(`/api/users/${userId}/tokens`)).body.map((t: { device_name: string }) => t.device_name);
    expect(names).toEqual(["exactly-one-mib"]);
  });
});

describe("a request without a session", () => {
  const protectedCalls = ENDPOINTS.filter((e) => !e.public).flatMap((e) => e.methods.map((method) => ({ method, path: e.path })));

  test("answers 401 on every endpoint except login", async () => {
    for (const { method, path } of protectedCalls) {
      const body = method === "POST" || method === "PUT" ? {} : undefined;
      const res = await anonymous.call(method, path, body);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
      expectErrorBody(res, 401);
    }
  });

  test("answers 401 on every endpoint except login with a made-up session cookie", async () => {
    const forged = new AdminClient(server.adminUrl);
    forged.cookie = "tunnel_admin_session=" + "A".repeat(43);
    for (const { method, path } of protectedCalls) {
      const res = await forged.call(method, path, method === "POST" || method === "PUT" ? {} : undefined);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
      expectErrorBody(res, 401);
    }
  });

  test("answers 401 before looking at the id or the body", async () => {
    for (const [method, path, body] of [
      ["GET", "/api/users/abc", undefined],
      ["DELETE", "/api/tokens/1.5", undefined],
      ["POST", "/api/users", "{not json"],
      ["POST", "/api/domains", { subdomain: "-bad-" }],
      ["GET", "/api/analytics/traffic?days=0", undefined],
    ] as const) {
      const res = await anonymous.call(method, path, body);
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 401 });
      expectErrorBody(res, 401);
    }
  });

  test("changes nothing", async () => {
    const before = (await api.get("/api/users")).body;
    await anonymous.post("/api/users", { username: "sneaky", password: "password-123" });
    await anonymous.delete(`/api/users/${userId}`);
    await anonymous.put(`/api/users/${userId}`, { enabled: false });
    await anonymous.post("/api/domains", { subdomain: "sneaky", user_id: userId });
    expect((await api.get("/api/users")).body).toEqual(before);
    expect((await api.get("/api/domains")).body).toEqual([]);
  });
});
