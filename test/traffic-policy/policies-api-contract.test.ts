/**
 * /api/policies under the admin API's conventions: every error is
 * `{"error": "<message>"}` with the spec's status codes (400 bad input,
 * 401 no session, 403 not an administrator, 404 no such policy, 405 a
 * method the path does not have, with Allow), lists are plain arrays as
 * every other list of the API, and bad input of every kind loses nothing.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { AdminClient, signedIn, type ApiResponse } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

setDefaultTimeout(60_000);

let server: TestServer;
let api: AdminClient;
let userLogin: ApiResponse;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  await api.createUser("plain-user");
  userLogin = await new AdminClient(server.adminUrl).login("plain-user", "password-123");
});
afterAll(() => server?.stop());

function expectError(res: ApiResponse, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(typeof res.body).toBe("object");
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error).toBe("string");
  expect(res.body.error.length).toBeGreaterThan(0);
  if (mentions) expect(res.body.error).toContain(mentions);
}

const DOC = "on_http_request:\n  - actions: [{ type: deny }]\n";

describe("/api/policies and the admin API's conventions", () => {
  test("no session: 401 with the error body (a user who is not an administrator gets no session: 403 at login); an admin API key is taken", async () => {
    expectError(userLogin, 403);
    const anonymous = new AdminClient(server.adminUrl);
    for (const [method, path] of [["GET", "/api/policies"], ["POST", "/api/policies"], ["GET", "/api/policies/1"], ["PUT", "/api/policies/1"], ["DELETE", "/api/policies/1"]] as const) {
      expectError(await anonymous.call(method, path, method === "GET" || method === "DELETE" ? undefined : { name: "x", policy: DOC }), 401);
    }
    const key = await api.post("/api/keys", { name: "policies" });
    expect(key.status).toBe(201);
    const withKey = await anonymous.call("GET", "/api/policies", undefined, { Authorization: `Bearer ${key.body.key}` });
    expect(withKey).toMatchObject({ status: 200, body: [] });
  });

  test("the list is a plain array, as the API's other lists; created 201, read 200, deleted {status: deleted}", async () => {
    const made = await api.post("/api/policies", { name: "contract", policy: DOC });
    expect(made.status).toBe(201);
    const list = await api.get("/api/policies");
    expect(list.status).toBe(200);
    expect(Array.isArray(list.body)).toBe(true);
    expect(list.body).toEqual([made.body]);
    expect(await api.get(`/api/policies/${made.body.id}`)).toMatchObject({ status: 200, body: made.body });
    expect(await api.delete(`/api/policies/${made.body.id}`)).toMatchObject({ status: 200, body: { status: "deleted" } });
    expectError(await api.delete(`/api/policies/${made.body.id}`), 404);
    expectError(await api.put(`/api/policies/${made.body.id}`, { name: "again" }), 404);
  });

  test("bad input: 400 with the error body, naming what is wrong; nothing is made", async () => {
    expectError(await api.call("POST", "/api/policies", "{not json"), 400);
    expectError(await api.call("POST", "/api/policies", "[]"), 400);
    expectError(await api.post("/api/policies", { policy: DOC }), 400, "name");
    expectError(await api.post("/api/policies", { name: "no document" }), 400, "policy");
    expectError(await api.post("/api/policies", { name: 7, policy: DOC }), 400, "name");
    expectError(await api.post("/api/policies", { name: "bad scope", scope: "planet", policy: DOC }), 400, "scope");
    expectError(await api.post("/api/policies", { name: "bad doc", policy: 42 }), 400, "policy");
    expectError(await api.post("/api/policies", { name: "forward", policy: "on_http_request:\n  - actions: [{ type: forward-internal }]\n" }), 400, "forward-internal");
    expect((await api.get("/api/policies")).body).toEqual([]);
  });

  test("ids that are not one: 404 (as the API's other :id paths); methods the paths do not have: 405 with Allow", async () => {
    for (const id of ["abc", "-1", "1.5", "0"]) {
      const res = await api.get(`/api/policies/${id}`);
      expect([400, 404]).toContain(res.status);
      expectError(res, res.status);
    }
    for (const [method, path] of [["PATCH", "/api/policies"], ["DELETE", "/api/policies"], ["PUT", "/api/policies"], ["PATCH", "/api/policies/1"], ["POST", "/api/policies/1"]] as const) {
      const res = await api.call(method, path, {});
      expectError(res, 405);
      expect(res.headers.get("allow")).toBeTruthy();
    }
  });

  test("a name taken: 409 with the error body", async () => {
    const made = await api.post("/api/policies", { name: "once", policy: DOC });
    expect(made.status).toBe(201);
    expectError(await api.post("/api/policies", { name: "once", policy: DOC }), 409);
    await api.delete(`/api/policies/${made.body.id}`);
  });
});
