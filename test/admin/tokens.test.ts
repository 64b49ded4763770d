/**
 * Per-device access tokens through the admin API of a real server:
 * generation (shown once, only a SHA-256 kept), listing, revocation, the
 * active_tokens count, and what deleting a user does to tokens.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
}, 30_000);
afterAll(() => server?.stop());

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;
const TOKEN_FIELDS = ["created_at", "device_name", "enabled", "id", "last_used", "user_id"];

function expectError(res: { status: number; body: unknown }, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: expect.any(String) });
  const message = (res.body as { error: string }).error;
  expect(message.length).toBeGreaterThan(0);
  if (mentions) expect(message).toContain(mentions);
}

/** Reads every row of the tokens table straight from the server's database. */
function tokenRows(where = "1 = 1", ...params: number[]): Record<string, unknown>[] {
  const db = new Database(join(server.dataDir, "burrow.db"));
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    return db.query(`SELECT * FROM tokens WHERE ${where}`).all(...params) as Record<string, unknown>[];
  } finally {
    db.close();
  }
}

async function generate(userId: number, deviceName = "laptop") {
  const res = await api.post(`/api/users/${userId}/tokens`, { device_name: deviceName });
  expect(res.status).toBe(201);
  return res.body as { token: string; token_id: number; message: string };
}

describe("generating a token", () => {
  test("answers 201 with the secret, its id and a message", async () => {
    const userId = await api.createUser("gen-shape");
    const res = await api.post(`/api/users/${userId}/tokens`, { device_name: "laptop" });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(["message", "token", "token_id"]);
    expect(Number.isInteger(res.body.token_id)).toBe(true);
    expect(res.body.token_id).toBeGreaterThan(0);
    expect(typeof res.body.message).toBe("string");
    expect(res.body.message.length).toBeGreaterThan(0);
  });

  test("makes a secret of the prefix brw_ and at least 43 base62 or base64url characters", async () => {
    const userId = await api.createUser("gen-format");
    const { token } = await generate(userId);
    expect(token).toMatch(/^brw_[A-Za-z0-9_-]{43,}$/);
  });

  test("makes a different secret and a new id every time, even for the same device name", async () => {
    const userId = await api.createUser("gen-unique");
    const made = [];
    for (let i = 0; i < 8; i++) made.push(await generate(userId, "same-device"));
    expect(new Set(made.map((m) => m.token)).size).toBe(8);
    // the random parts differ too, not only a counter somewhere in the string
    expect(new Set(made.map((m) => m.token.slice(4, 20))).size).toBe(8);
    const ids = made.map((m) => m.token_id);
    expect(new Set(ids).size).toBe(8);
    expect([...ids].sort((a, b) => a - b)).toEqual(ids);
  });

  test("stores only a SHA-256 of the secret, never the secret itself", async () => {
    const userId = await api.createUser("gen-hash");
    const { token, token_id } = await generate(userId, "hash-device");
    const rows = tokenRows("id = ?", token_id);
    expect(rows).toHaveLength(1);
    const values = Object.values(rows[0]!);
    const asText = (v: unknown) => (v instanceof Uint8Array ? Buffer.from(v).toString("latin1") : String(v));
    for (const value of values) {
      expect(asText(value)).not.toContain(token);
      expect(asText(value)).not.toContain(token.slice(4)); // the random part without the prefix
    }
    const digest = new Bun.CryptoHasher("sha256").update(token).digest();
    const forms = [digest.toString("hex"), digest.toString("base64"), digest.toString("base64url")];
    const hasDigest = values.some(
      (v) => (v instanceof Uint8Array && Buffer.from(v).equals(digest)) || forms.includes(String(v).toLowerCase()) || forms.includes(String(v)),
    );
    expect(hasDigest).toBe(true);
  });

  test("answers 404 for a user that does not exist", async () => {
    expectError(await api.post("/api/users/999999/tokens", { device_name: "laptop" }), 404);
    expect(tokenRows("user_id = ?", 999999)).toEqual([]);
  });

  test("answers 400 naming device_name when it is missing, empty or not a string", async () => {
    const userId = await api.createUser("gen-bad-name");
    expectError(await api.post(`/api/users/${userId}/tokens`, {}), 400, "device_name");
    expectError(await api.post(`/api/users/${userId}/tokens`, { device_name: "" }), 400, "device_name");
    expectError(await api.post(`/api/users/${userId}/tokens`, { device_name: 42 }), 400, "device_name");
    expectError(await api.post(`/api/users/${userId}/tokens`, { device_name: null }), 400, "device_name");
    const list = await api.get(`/api/users/${userId}/tokens`);
    expect(list.body).toEqual([]);
  });
});

describe("listing a user's tokens", () => {
  test("gives id, user_id, device_name, enabled, created_at and last_used, ordered by id", async () => {
    const userId = await api.createUser("list-shape");
    const a = await generate(userId, "phone");
    const b = await generate(userId, "laptop");
    const c = await generate(userId, "desktop");
    const res = await api.get(`/api/users/${userId}/tokens`);
    expect(res.status).toBe(200);
    expect(res.body.map((t: { id: number }) => t.id)).toEqual([a.token_id, b.token_id, c.token_id]);
    expect(res.body.map((t: { device_name: string }) => t.device_name)).toEqual(["phone", "laptop", "desktop"]);
    for (const t of res.body) {
      expect(Object.keys(t).sort()).toEqual(TOKEN_FIELDS);
      expect(t.user_id).toBe(userId);
      expect(t.enabled).toBe(true);
      expect(t.created_at).toMatch(ISO_UTC);
      expect(Math.abs(Date.parse(t.created_at) - Date.now())).toBeLessThan(24 * 3600 * 1000);
    }
  });

  test("shows last_used as null for a token that was never used", async () => {
    const userId = await api.createUser("list-unused");
    await generate(userId);
    const res = await api.get(`/api/users/${userId}/tokens`);
    expect(res.body).toHaveLength(1);
    expect(res.body[0]).toHaveProperty("last_used", null);
  });

  test("never shows the secret, in the list or in the user's details", async () => {
    const userId = await api.createUser("list-secret");
    const { token } = await generate(userId);
    const list = await api.get(`/api/users/${userId}/tokens`);
    expect(JSON.stringify(list.body)).not.toContain(token.slice(4));
    const details = await api.get(`/api/users/${userId}`);
    expect(JSON.stringify(details.body)).not.toContain(token.slice(4));
  });

  test("shows only the tokens of that user", async () => {
    const mine = await api.createUser("list-mine");
    const theirs = await api.createUser("list-theirs");
    const own = await generate(mine, "own");
    await generate(theirs, "other");
    const res = await api.get(`/api/users/${mine}/tokens`);
    expect(res.body.map((t: { id: number }) => t.id)).toEqual([own.token_id]);
  });

  test("is an empty array for a user without tokens", async () => {
    const userId = await api.createUser("list-empty");
    const res = await api.get(`/api/users/${userId}/tokens`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual([]);
  });

  test("answers 404 for a user that does not exist", async () => {
    expectError(await api.get("/api/users/999999/tokens"), 404);
  });
});

describe("revoking a token", () => {
  test("answers {status: revoked} and keeps the token in the list, disabled", async () => {
    const userId = await api.createUser("revoke-keep");
    const keep = await generate(userId, "keep");
    const gone = await generate(userId, "revoke-me");
    const res = await api.delete(`/api/tokens/${gone.token_id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "revoked" });
    const list = await api.get(`/api/users/${userId}/tokens`);
    expect(list.body.map((t: { id: number; enabled: boolean }) => [t.id, t.enabled])).toEqual([
      [keep.token_id, true],
      [gone.token_id, false],
    ]);
    expect(tokenRows("id = ?", gone.token_id)).toHaveLength(1);
  });

  test("is idempotent: revoking a revoked token answers revoked again", async () => {
    const userId = await api.createUser("revoke-twice");
    const { token_id } = await generate(userId);
    expect((await api.delete(`/api/tokens/${token_id}`)).body).toEqual({ status: "revoked" });
    const again = await api.delete(`/api/tokens/${token_id}`);
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ status: "revoked" });
    const list = await api.get(`/api/users/${userId}/tokens`);
    expect(list.body).toHaveLength(1);
    expect(list.body[0].enabled).toBe(false);
  });

  test("answers 404 for a token that does not exist", async () => {
    expectError(await api.delete("/api/tokens/999999"), 404);
  });
});

describe("active_tokens in a user's details", () => {
  test("counts enabled tokens only", async () => {
    const userId = await api.createUser("count-active");
    const activeTokens = async () => {
      const res = await api.get(`/api/users/${userId}`);
      expect(res.status).toBe(200);
      return res.body.active_tokens;
    };
    expect(await activeTokens()).toBe(0);
    const made = [await generate(userId, "a"), await generate(userId, "b"), await generate(userId, "c")];
    expect(await activeTokens()).toBe(3);
    await api.delete(`/api/tokens/${made[1]!.token_id}`);
    expect(await activeTokens()).toBe(2);
    await api.delete(`/api/tokens/${made[1]!.token_id}`); // revoking again changes nothing
    expect(await activeTokens()).toBe(2);
    await api.delete(`/api/tokens/${made[0]!.token_id}`);
    await api.delete(`/api/tokens/${made[2]!.token_id}`);
    expect(await activeTokens()).toBe(0);
  });

  test("does not count another user's tokens", async () => {
    const a = await api.createUser("count-a");
    const b = await api.createUser("count-b");
    await generate(a);
    await generate(b);
    await generate(b);
    expect((await api.get(`/api/users/${a}`)).body.active_tokens).toBe(1);
    expect((await api.get(`/api/users/${b}`)).body.active_tokens).toBe(2);
  });
});

describe("deleting a user", () => {
  test("deletes all of that user's tokens and leaves other users' tokens alone", async () => {
    const doomed = await api.createUser("doomed");
    const survivor = await api.createUser("survivor");
    const doomedTokens = [await generate(doomed, "d1"), await generate(doomed, "d2")];
    await api.delete(`/api/tokens/${doomedTokens[1]!.token_id}`); // a revoked one goes too
    await generate(survivor, "s1");
    await generate(survivor, "s2");
    const before = await api.get(`/api/users/${survivor}/tokens`);

    const res = await api.delete(`/api/users/${doomed}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "deleted" });

    expect(tokenRows("user_id = ?", doomed)).toEqual([]);
    for (const t of doomedTokens) expect(tokenRows("id = ?", t.token_id)).toEqual([]);
    expectError(await api.get(`/api/users/${doomed}/tokens`), 404);
    expectError(await api.delete(`/api/tokens/${doomedTokens[0]!.token_id}`), 404);

    const after = await api.get(`/api/users/${survivor}/tokens`);
    expect(after.status).toBe(200);
    expect(after.body).toEqual(before.body);
    expect(after.body).toHaveLength(2);
    expect((await api.get(`/api/users/${survivor}`)).body.active_tokens).toBe(2);
  });
});
