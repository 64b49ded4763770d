/**
 * GET /api/openapi.json: a valid OpenAPI 3.1 document (checked by
 * @seriousme/openapi-schema-validator, which knows 3.1's own schema) that
 * needs no session; every route the admin port answers is in it, walked
 * from the live route table of createAdminApp with every kind of route the
 * server gives it, and nothing in it is a route the real server does not
 * answer; and the answers of a real server match the documented shapes
 * (strict: a field the document does not name fails).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Validator } from "@seriousme/openapi-schema-validator";
import * as v from "valibot";
import { openApiPath } from "../../src/admin/openapi.ts";
import { PANEL_PATHS } from "../../src/admin/panel/serve.ts";
import { withFullAdminApp } from "../../build/reference/api.ts";
import * as R from "../../src/api/responses.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let doc: any;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  const res = await fetch(server.adminUrl + "/api/openapi.json");
  expect(res.status).toBe(200);
  doc = await res.json();
}, 30_000);
afterAll(() => server?.stop());

/** The admin app's route table as the server builds it: every option that adds routes is given. */
function liveRouteTable(): Promise<{ path: string; methods: string[] }[]> {
  const panel = new Set<string>(PANEL_PATHS);
  return withFullAdminApp((app) =>
    Object.entries(app.routes)
      .filter(([path]) => !panel.has(path))
      .map(([path, handlers]) => ({ path, methods: Object.keys(handlers as Record<string, unknown>) })),
  );
}

describe("the document", () => {
  test("is served without a session, as JSON, and is valid OpenAPI 3.1", async () => {
    const res = await fetch(server.adminUrl + "/api/openapi.json");
    expect(res.headers.get("content-type")).toContain("application/json");
    expect(doc.openapi).toBe("3.1.0");
    const validator = new Validator();
    const result = await validator.validate(structuredClone(doc));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  test("documents every route of the live route table, each method", async () => {
    const table = await liveRouteTable();
    expect(table.length).toBeGreaterThan(15);
    const missing: string[] = [];
    for (const route of table) {
      for (const method of route.methods) {
        if (!doc.paths[openApiPath(route.path)]?.[method.toLowerCase()]) missing.push(`${method} ${route.path}`);
      }
    }
    expect(missing).toEqual([]);
  });

  test("names nothing the real server does not answer (no 404 for any documented path, no 405 for any documented method)", async () => {
    const prober = await signedIn(server); // its own session: the probe signs out too
    for (const [path, methods] of Object.entries<Record<string, unknown>>(doc.paths)) {
      const concrete = path.replace(/\{[a-z_]+\}/g, "999999");
      for (const method of Object.keys(methods)) {
        const res = await prober.call(method.toUpperCase(), concrete, method === "get" || method === "delete" ? undefined : {});
        expect([404, 405].includes(res.status) && /no such endpoint|not allowed/.test(JSON.stringify(res.body)), `${method} ${path}: ${res.status}`).toBe(false);
      }
    }
  });

  test("request bodies come from the schemas that check them: required fields and limits", () => {
    const create = doc.paths["/api/users"].post.requestBody.content["application/json"].schema;
    expect(create.required).toEqual(["username", "password"]);
    expect(create.properties.password).toMatchObject({ type: "string", minLength: 8, maxLength: 1024 });
    const key = doc.paths["/api/keys"].post.requestBody.content["application/json"].schema;
    expect(key.required).toEqual(["name"]);
    expect(key.properties.expires_in_days).toMatchObject({ type: "integer", minimum: 1, maximum: 3650 });
    const params = doc.paths["/api/audit"].get.parameters;
    expect(params.find((p: any) => p.name === "limit")).toMatchObject({ in: "query", required: false, schema: { type: "integer", minimum: 1, maximum: 1000 } });
  });

  test("says which routes need no credentials, and how to give them", () => {
    expect(doc.paths["/api/auth/login"].post.security).toEqual([]);
    expect(doc.paths["/api/openapi.json"].get.security).toEqual([]);
    expect(doc.paths["/api/users"].get.security).toBeUndefined();
    expect(doc.security).toEqual([{ session: [] }, { apiKey: [] }]);
    expect(doc.components.securitySchemes.apiKey).toMatchObject({ type: "http", scheme: "bearer" });
  });
});

describe("real answers match the documented shapes", () => {
  const check = (schema: v.GenericSchema, body: unknown, what: string) => {
    const result = v.safeParse(schema, body);
    expect(result.success ? [] : result.issues.map((i) => `${what}: ${v.getDotPath(i) ?? ""} ${i.message}`)).toEqual([]);
  };

  test("users, tokens, domains, keys, the audit log, traffic and the rest", async () => {
    const me = await api.get("/api/auth/me");
    check(R.MeJson, me.body, "me");
    const user = await api.post("/api/users", { username: "shaped", password: "password-123" });
    check(R.UserJson, user.body, "POST /api/users");
    check(R.EntryList(R.UserJson), (await api.get("/api/users")).body, "GET /api/users");
    check(R.UserDetailsJson, (await api.get(`/api/users/${user.body.id}`)).body, "GET /api/users/:id");
    check(R.UserJson, (await api.put(`/api/users/${user.body.id}`, { max_tunnels: 2 })).body, "PUT /api/users/:id");
    const token = await api.post(`/api/users/${user.body.id}/tokens`, { device_name: "laptop" });
    check(R.NewTokenJson, token.body, "POST tokens");
    check(R.EntryList(R.TokenJson), (await api.get(`/api/users/${user.body.id}/tokens`)).body, "GET tokens");
    check(R.StatusBody("revoked"), (await api.delete(`/api/tokens/${token.body.token_id}`)).body, "DELETE token");
    const domain = await api.post("/api/domains", { subdomain: "shaped", user_id: user.body.id });
    check(R.DomainJson, domain.body, "POST /api/domains");
    check(R.EntryList(R.DomainJson), (await api.get("/api/domains")).body, "GET /api/domains");
    check(R.StatusBody("removed"), (await api.delete(`/api/domains/${domain.body.id}`)).body, "DELETE domain");
    const key = await api.post("/api/keys", { name: "shape", expires_in_days: 3 });
    check(R.NewAdminKeyJson, key.body, "POST /api/keys");
    check(R.EntryList(R.AdminKeyJson), (await api.get("/api/keys")).body, "GET /api/keys");
    check(R.StatusBody("revoked"), (await api.delete(`/api/keys/${key.body.key_id}`)).body, "DELETE key");
    check(R.EntryList(R.AuditEntryJson), (await api.get("/api/audit?limit=1000")).body, "GET /api/audit");
    check(R.DashboardJson, (await api.get("/api/dashboard")).body, "dashboard");
    check(R.EntryList(R.ActiveTunnelJson), (await api.get("/api/tunnels/active")).body, "active tunnels");
    check(R.EntryList(R.UserTrafficJson), (await api.get("/api/analytics/traffic")).body, "traffic per user");
    check(R.EntryList(R.DayTrafficJson), (await api.get(`/api/analytics/traffic?user_id=${user.body.id}&days=3`)).body, "traffic per day");
    check(R.ServerInfoJson, (await api.get("/api/server")).body, "server");
    check(R.CertificateReportJson, (await api.get("/api/certificates")).body, "certificates");
    check(R.StatusBody("deleted"), (await api.delete(`/api/users/${user.body.id}`)).body, "DELETE user");
    check(R.ErrorBody, (await api.get("/api/users/999999")).body, "an error");
    check(R.ReadyJson, await (await fetch(server.adminUrl + "/readyz")).json(), "readyz");
  });
});
