/**
 * Reserved subdomains through the admin API of a real server: reserving
 * (lowercased, one DNS label, not a system name, not twice), listing and
 * releasing, and the --system-subdomains flag.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
/** A user that owns nothing in particular, for tests that need any user. */
let owner: number;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  owner = await api.createUser("owner");
}, 30_000);
afterAll(() => server?.stop());

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/;

function expectError(res: { status: number; body: unknown }, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(res.body).toEqual({ error: expect.any(String) });
  const message = (res.body as { error: string }).error;
  expect(message.length).toBeGreaterThan(0);
  if (mentions) expect(message).toContain(mentions);
}

interface Domain {
  id: number;
  subdomain: string;
  user_id: number;
  username: string;
  created_at: string;
}

const list = async (a: AdminClient = api): Promise<Domain[]> => {
  const res = await a.get("/api/domains");
  expect(res.status).toBe(200);
  return res.body;
};
const names = async (a: AdminClient = api) => (await list(a)).map((d) => d.subdomain);

describe("reserving a subdomain", () => {
  test("answers 201 with the subdomain, the user's id and the username", async () => {
    const userId = await api.createUser("reserve-shape");
    const res = await api.post("/api/domains", { subdomain: "shape", user_id: userId });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ subdomain: "shape", user_id: userId, username: "reserve-shape" });
    expect(await names()).toContain("shape");
  });

  test("lowercases the name on input", async () => {
    const res = await api.post("/api/domains", { subdomain: "MyApp", user_id: owner });
    expect(res.status).toBe(201);
    expect(res.body.subdomain).toBe("myapp");
    const all = await names();
    expect(all).toContain("myapp");
    expect(all).not.toContain("MyApp");
  });

  test("accepts one DNS label of 1 to 63 characters from a-z, 0-9 and -", async () => {
    const good = ["a", "7", "a-b", "9lives", "x--y", "abc123", "z".repeat(63)];
    for (const subdomain of good) {
      const res = await api.post("/api/domains", { subdomain, user_id: owner });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 201 });
      expect(res.body.subdomain).toBe(subdomain);
    }
    const all = await names();
    for (const subdomain of good) expect(all).toContain(subdomain);
  });

  test("answers 400 naming subdomain for anything that is not one DNS label, and reserves nothing", async () => {
    const before = await list();
    const bad = ["", "-", "-lead", "trail-", "a.b", "a_b", "a b", "sp ace", "ümlaut", "a/b", "*", "x".repeat(64), "dot."];
    for (const subdomain of bad) {
      const res = await api.post("/api/domains", { subdomain, user_id: owner });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 400 });
      expectError(res, 400, "subdomain");
    }
    expect(await list()).toEqual(before);
  });

  test("answers 400 naming subdomain when it is missing or not a string", async () => {
    expectError(await api.post("/api/domains", { user_id: owner }), 400, "subdomain");
    expectError(await api.post("/api/domains", { subdomain: 12, user_id: owner }), 400, "subdomain");
    expectError(await api.post("/api/domains", { subdomain: null, user_id: owner }), 400, "subdomain");
    expectError(await api.post("/api/domains", { subdomain: ["a"], user_id: owner }), 400, "subdomain");
  });

  test("answers 400 naming user_id when it is missing or not a positive integer", async () => {
    expectError(await api.post("/api/domains", { subdomain: "no-user" }), 400, "user_id");
    expectError(await api.post("/api/domains", { subdomain: "no-user", user_id: String(owner) }), 400, "user_id");
    expectError(await api.post("/api/domains", { subdomain: "no-user", user_id: 1.5 }), 400, "user_id");
    expectError(await api.post("/api/domains", { subdomain: "no-user", user_id: null }), 400, "user_id");
    expectError(await api.post("/api/domains", { subdomain: "no-user", user_id: true }), 400, "user_id");
    expect(await names()).not.toContain("no-user");
  });

  test("answers 404 for a user that does not exist", async () => {
    expectError(await api.post("/api/domains", { subdomain: "orphan", user_id: 999999 }), 404);
    expect(await names()).not.toContain("orphan");
  });

  test("answers 409 for a name that is already reserved, also when spelled in other case", async () => {
    const other = await api.createUser("dup-other");
    expect((await api.post("/api/domains", { subdomain: "taken", user_id: owner })).status).toBe(201);
    expectError(await api.post("/api/domains", { subdomain: "taken", user_id: owner }), 409);
    expectError(await api.post("/api/domains", { subdomain: "taken", user_id: other }), 409);
    expectError(await api.post("/api/domains", { subdomain: "TAKEN", user_id: other }), 409);
    expectError(await api.post("/api/domains", { subdomain: "TaKeN", user_id: owner }), 409);
    const matches = (await list()).filter((d) => d.subdomain === "taken");
    expect(matches).toHaveLength(1);
    expect(matches[0]!.user_id).toBe(owner);
  });

  test("refuses the system names www, admin, api and mail with 400, in any case", async () => {
    for (const subdomain of ["www", "admin", "api", "mail", "WWW", "Admin", "API", "Mail"]) {
      const res = await api.post("/api/domains", { subdomain, user_id: owner });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 400 });
      expectError(res, 400);
    }
    const all = await names();
    for (const name of ["www", "admin", "api", "mail"]) expect(all).not.toContain(name);
  });

  test("still allows names that merely contain a system name", async () => {
    for (const subdomain of ["www2", "myadmin", "api-docs", "webmail"]) {
      const res = await api.post("/api/domains", { subdomain, user_id: owner });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 201 });
    }
  });
});

describe("listing reserved subdomains", () => {
  test("gives id, subdomain, user_id, username and created_at, ordered by id", async () => {
    const alice = await api.createUser("list-alice");
    const bob = await api.createUser("list-bob");
    // reserved in an order that is not alphabetical, to tell id order from name order
    const made: Domain[] = [];
    for (const [subdomain, userId] of [["zulu", alice], ["alpha", bob], ["mike", alice]] as const) {
      const res = await api.post("/api/domains", { subdomain, user_id: userId });
      expect(res.status).toBe(201);
      made.push(res.body);
    }
    const all = await list();
    const ids = all.map((d) => d.id);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    for (const d of all) {
      expect(Object.keys(d).sort()).toEqual(["created_at", "id", "subdomain", "user_id", "username"]);
      expect(Number.isInteger(d.id)).toBe(true);
      expect(d.created_at).toMatch(ISO_UTC);
    }
    const mine = all.filter((d) => ["zulu", "alpha", "mike"].includes(d.subdomain));
    expect(mine.map((d) => [d.subdomain, d.user_id, d.username])).toEqual([
      ["zulu", alice, "list-alice"],
      ["alpha", bob, "list-bob"],
      ["mike", alice, "list-alice"],
    ]);
    // what POST answered is what the list holds
    for (const m of made) expect(all.find((d) => d.subdomain === m.subdomain)).toMatchObject(m);
  });

  test("shows a user's new name after the user is renamed", async () => {
    const userId = await api.createUser("before-rename");
    expect((await api.post("/api/domains", { subdomain: "renamed-owner", user_id: userId })).status).toBe(201);
    expect((await api.put(`/api/users/${userId}`, { username: "after-rename" })).status).toBe(200);
    const entry = (await list()).find((d) => d.subdomain === "renamed-owner");
    expect(entry?.username).toBe("after-rename");
  });
});

describe("releasing a reserved subdomain", () => {
  test("answers {status: removed}, drops it from the list and frees the name", async () => {
    const created = await api.post("/api/domains", { subdomain: "release-me", user_id: owner });
    expect(created.status).toBe(201);
    const id = (await list()).find((d) => d.subdomain === "release-me")!.id;
    const res = await api.delete(`/api/domains/${id}`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "removed" });
    expect(await names()).not.toContain("release-me");
    const other = await api.createUser("release-next");
    const again = await api.post("/api/domains", { subdomain: "release-me", user_id: other });
    expect(again.status).toBe(201);
    expect(again.body).toMatchObject({ subdomain: "release-me", user_id: other, username: "release-next" });
  });

  test("answers 404 for an id that does not exist, including one already released", async () => {
    expect((await api.post("/api/domains", { subdomain: "twice-released", user_id: owner })).status).toBe(201);
    const id = (await list()).find((d) => d.subdomain === "twice-released")!.id;
    expect((await api.delete(`/api/domains/${id}`)).status).toBe(200);
    expectError(await api.delete(`/api/domains/${id}`), 404);
    expectError(await api.delete("/api/domains/999999"), 404);
  });

  test("releases only the one asked for", async () => {
    for (const subdomain of ["keep-one", "drop-one", "keep-two"]) {
      expect((await api.post("/api/domains", { subdomain, user_id: owner })).status).toBe(201);
    }
    const before = await list();
    const drop = before.find((d) => d.subdomain === "drop-one")!;
    expect((await api.delete(`/api/domains/${drop.id}`)).status).toBe(200);
    expect(await list()).toEqual(before.filter((d) => d.id !== drop.id));
  });

  test("happens to a user's names when the user is deleted", async () => {
    const userId = await api.createUser("leaving");
    expect((await api.post("/api/domains", { subdomain: "leavers-name", user_id: userId })).status).toBe(201);
    expect((await api.delete(`/api/users/${userId}`)).status).toBe(200);
    expect(await names()).not.toContain("leavers-name");
    expect((await api.post("/api/domains", { subdomain: "leavers-name", user_id: owner })).status).toBe(201);
  });
});

describe("the --system-subdomains flag", () => {
  test("replaces the list of system names: www becomes reservable and the listed names do not", async () => {
    await using custom = await startServer({ args: ["--system-subdomains", "a,Beta"] });
    const c = await signedIn(custom);
    const userId = await c.createUser("custom");
    for (const subdomain of ["www", "admin", "api", "mail"]) {
      const res = await c.post("/api/domains", { subdomain, user_id: userId });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 201 });
    }
    for (const subdomain of ["a", "A", "beta", "BETA"]) {
      const res = await c.post("/api/domains", { subdomain, user_id: userId });
      expect({ subdomain, status: res.status }).toEqual({ subdomain, status: 400 });
      expectError(res, 400);
    }
    expect((await names(c)).sort()).toEqual(["admin", "api", "mail", "www"]);
  }, 30_000);
});
