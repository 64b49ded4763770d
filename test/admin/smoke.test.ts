import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
});
afterAll(() => server?.stop());

describe("a fresh server", () => {
  test("answers 401 on /api/auth/me without a session", async () => {
    const res = await fetch(server.adminUrl + "/api/auth/me");
    expect(res.status).toBe(401);
    expect(await res.json()).toEqual({ error: expect.any(String) });
  });

  test("lets the first admin from the environment sign in", async () => {
    const me = await api.get("/api/auth/me");
    expect(me.status).toBe(200);
    expect(me.body).toEqual({ id: 1, username: "admin", role: "admin" });
  });
});
