/**
 * GET /api/certificates: the server's certificate report as the API shows
 * it (snake_case: a failure's retryAfter is retry_after; dates ISO 8601 UTC;
 * no directory outside ACME), read fresh on every request, for admins only:
 * 401 without a session or once demoted, 405 for another method, each
 * with the usual {"error": ...}. The reporter is a fake: the real server's
 * is wired to the ACME machinery.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { CertificateReport } from "../../src/acme/report.ts";
import { AdminClient } from "../harness/admin.ts";
import { startAdminApp, type InProcessAdmin } from "../harness/admin-app.ts";

const GOOD = {
  id: "*.tunnels.example.com",
  names: ["*.tunnels.example.com", "tunnels.example.com"],
  issuer: "(STAGING) Pretend Pear X1",
  not_before: "2026-11-01T10:00:00.000Z",
  not_after: "2027-01-30T10:00:00.000Z",
  last_error: null,
  next_renewal: "2026-12-31T10:00:00.000Z",
};

const FAILING = {
  id: "admin.example.com",
  names: ["admin.example.com"],
  issuer: null,
  not_before: null,
  not_after: null,
  last_error: {
    code: "RATE_LIMITED" as const,
    message: "the ACME CA's rate limit was hit: too many certificates already issued",
    at: "2026-11-23T08:15:00.000Z",
    retryAfter: "2026-11-23T11:15:00.000Z",
  },
  next_renewal: "2026-11-23T11:15:00.000Z",
};

const ACME: CertificateReport = {
  mode: "acme",
  directory: "https://acme-staging-v02.api.letsencrypt.org/directory",
  certificates: [GOOD, FAILING],
};

let current: CertificateReport = ACME;
let reads = 0;
let app: InProcessAdmin;
let bare: InProcessAdmin;
let api: AdminClient;

async function signedInTo(adminUrl: string, username = "admin", password?: string): Promise<AdminClient> {
  const client = new AdminClient(adminUrl);
  const res = await client.login(username, password);
  if (res.status !== 200) throw new Error(`login ${username}: ${res.status} ${JSON.stringify(res.body)}`);
  return client;
}

beforeAll(async () => {
  app = await startAdminApp({
    certificates: () => {
      reads++;
      return current;
    },
  });
  bare = await startAdminApp();
  api = await signedInTo(app.adminUrl);
});
afterAll(async () => {
  await app?.stop();
  await bare?.stop();
});

function expectError(res: { status: number; body: unknown }, status: number) {
  expect(res.status).toBe(status);
  expect(Object.keys(res.body as object)).toEqual(["error"]);
  expect((res.body as { error: string }).error).toBeString();
}

describe("GET /api/certificates", () => {
  test("in ACME mode: the directory and each certificate, a failure's retryAfter as retry_after", async () => {
    current = ACME;
    const res = await api.get("/api/certificates");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    expect(res.body).toEqual({
      mode: "acme",
      directory: "https://acme-staging-v02.api.letsencrypt.org/directory",
      certificates: [
        GOOD,
        {
          id: "admin.example.com",
          names: ["admin.example.com"],
          issuer: null,
          not_before: null,
          not_after: null,
          last_error: {
            code: "RATE_LIMITED",
            message: "the ACME CA's rate limit was hit: too many certificates already issued",
            at: "2026-11-23T08:15:00.000Z",
            retry_after: "2026-11-23T11:15:00.000Z",
          },
          next_renewal: "2026-11-23T11:15:00.000Z",
        },
      ],
    });
    expect(JSON.stringify(res.body)).not.toContain("retryAfter");
  });

  test("a failure without a Retry-After has no retry_after at all", async () => {
    const { retryAfter: _, ...noRetry } = FAILING.last_error;
    current = { ...ACME, certificates: [{ ...FAILING, last_error: { ...noRetry, code: "CHALLENGE_FAILED" } }] };
    const res = await api.get("/api/certificates");
    expect(res.status).toBe(200);
    expect(Object.keys(res.body.certificates[0].last_error).sort()).toEqual(["at", "code", "message"]);
  });

  test("dates come out as ISO 8601 UTC with Z, whatever offset the report used", async () => {
    current = { mode: "files", certificates: [{ ...GOOD, not_before: "2026-11-01T11:00:00+01:00", not_after: "2027-01-30T10:00:00Z" }] };
    const res = await api.get("/api/certificates");
    expect(res.body.certificates[0].not_before).toBe("2026-11-01T10:00:00.000Z");
    expect(res.body.certificates[0].not_after).toBe("2027-01-30T10:00:00.000Z");
  });

  test("in files mode: no directory, the certificate given at start, no renewal", async () => {
    const fromFiles = { ...GOOD, id: "tunnels.example.com", names: ["tunnels.example.com"], issuer: "Example Corp CA", next_renewal: null };
    current = { mode: "files", certificates: [fromFiles] };
    const res = await api.get("/api/certificates");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ mode: "files", certificates: [fromFiles] });
    expect(Object.keys(res.body)).toEqual(["mode", "certificates"]);
  });

  test("in off mode, and by default when the server passes no reporter: no certificates", async () => {
    current = { mode: "off", certificates: [] };
    expect((await api.get("/api/certificates")).body).toEqual({ mode: "off", certificates: [] });
    const other = await signedInTo(bare.adminUrl);
    const res = await other.get("/api/certificates");
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ mode: "off", certificates: [] });
  });

  test("reads the report afresh on every request", async () => {
    current = ACME;
    const before = reads;
    await api.get("/api/certificates");
    current = { mode: "off", certificates: [] };
    expect((await api.get("/api/certificates")).body.mode).toBe("off");
    expect(reads - before).toBe(2);
  });
});

describe("who may read it", () => {
  test("nobody without a session: 401, and the report is not read", async () => {
    const before = reads;
    expectError(await new AdminClient(app.adminUrl).get("/api/certificates"), 401);
    const stale = new AdminClient(app.adminUrl);
    stale.cookie = "tunnel_admin_session=not-a-session";
    expectError(await stale.get("/api/certificates"), 401);
    expect(reads).toBe(before);
  });

  test("an admin demoted since signing in: 401 (the new role ended the session)", async () => {
    const id = await api.createUser("cert-reader", { role: "admin", password: "password-123" });
    const reader = await signedInTo(app.adminUrl, "cert-reader", "password-123");
    expect((await reader.get("/api/certificates")).status).toBe(200);
    expect((await api.put(`/api/users/${id}`, { role: "user" })).status).toBe(200);
    expectError(await reader.get("/api/certificates"), 401);
  });

  test("no other method: 405 with Allow: GET, signed in or not", async () => {
    for (const client of [api, new AdminClient(app.adminUrl)]) {
      for (const method of ["POST", "PUT", "DELETE", "PATCH"]) {
        const res = await client.call(method, "/api/certificates", method === "PATCH" ? undefined : {});
        expectError(res, 405);
        expect(res.headers.get("allow")).toBe("GET");
      }
    }
  });
});
