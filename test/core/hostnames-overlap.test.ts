/**
 * Custom hostnames that overlap: which names can name the same host (a
 * wildcard covers one label, as in TLS), the registration that refuses
 * another user's overlap (HOSTNAME_OVERLAP, naming the other hostname), and,
 * for rows that overlap from before that rule, who may use a name: the
 * exact registration beats a wildcard, and a wildcard never covers another
 * user's name, verified or pending. On a real database (SQLite).
 */
import { afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { coveringWildcard, hostnamesOverlap } from "../../src/validate/hostname.ts";

let opened: OpenedDb | undefined;
let dir: string | undefined;

afterEach(() => {
  opened?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function setUp() {
  dir = mkdtempSync(join(tmpdir(), "burrow-hostnames-"));
  opened = openDatabase(dir);
  const core = createCore({ store: opened.store, systemSubdomains: [], domain: "tunnels.test" });
  const alice = await core.users.create({ username: "alice", password: "a-good-password" });
  const bob = await core.users.create({ username: "bob", password: "a-good-password" });
  const { store } = opened;
  /** A row as an older burrow could have left it, without the overlap check. */
  const legacy = (hostname: string, userId: number, verified: boolean) =>
    store.run(store.db.insert(store.tables.customHostnames).values({ hostname, userId, verified, token: "t", createdAt: "2026-01-01T00:00:00.000Z", verifiedAt: verified ? "2026-01-01T00:00:00.000Z" : null }));
  return { core, alice: alice.id, bob: bob.id, legacy };
}

describe("hostname overlap: which names can name the same host", () => {
  test("a wildcard covers one label under its base, so it overlaps exactly those names", () => {
    expect(hostnamesOverlap("*.acme.test", "demo.acme.test")).toBe(true);
    expect(hostnamesOverlap("demo.acme.test", "*.acme.test")).toBe(true);
    expect(hostnamesOverlap("demo.acme.test", "demo.acme.test")).toBe(true);
    expect(hostnamesOverlap("*.acme.test", "*.acme.test")).toBe(true);
    // two labels under, the base itself, another wildcard: no host is named by both
    expect(hostnamesOverlap("*.acme.test", "x.y.acme.test")).toBe(false);
    expect(hostnamesOverlap("*.acme.test", "acme.test")).toBe(false);
    expect(hostnamesOverlap("*.acme.test", "*.dev.acme.test")).toBe(false);
    expect(hostnamesOverlap("*.acme.test", "demo.acme.testing")).toBe(false);
    expect(hostnamesOverlap("*.acme.test", "demoacme.test")).toBe(false);
    expect(hostnamesOverlap("demo.acme.test", "demo2.acme.test")).toBe(false);
  });

  test("the one wildcard that could cover a name is its parent's", () => {
    expect(coveringWildcard("demo.acme.test")).toBe("*.acme.test");
    expect(coveringWildcard("a.b.acme.test")).toBe("*.b.acme.test");
  });
});

describe("hostname overlap: registering is refused with HOSTNAME_OVERLAP naming the other hostname", () => {
  test("a wildcard over another user's names, verified or pending (the issue's case)", async () => {
    const { core, alice, bob } = await setUp();
    await core.hostnames.create("demo.acme.test", alice, true);
    await core.hostnames.create("pending.acme.test", alice, false);
    const refused = core.hostnames.create("*.acme.test", bob, true);
    await expect(refused).rejects.toMatchObject({ code: "HOSTNAME_OVERLAP", status: 409 });
    await expect(refused).rejects.toThrow(/'\*\.acme\.test' overlaps '(demo|pending)\.acme\.test', registered to user 'alice'/);
    expect((await core.hostnames.list(bob)).length).toBe(0);
  });

  test("only a pending name is enough", async () => {
    const { core, alice, bob } = await setUp();
    await core.hostnames.create("pending.acme.test", alice, false);
    await expect(core.hostnames.create("*.acme.test", bob, false)).rejects.toThrow(/overlaps 'pending\.acme\.test'/);
  });

  test("a name under another user's wildcard", async () => {
    const { core, alice, bob } = await setUp();
    await core.hostnames.create("*.acme.test", bob, false);
    await expect(core.hostnames.create("demo.acme.test", alice, true)).rejects.toMatchObject({ code: "HOSTNAME_OVERLAP" });
    await expect(core.hostnames.create("demo.acme.test", alice, true)).rejects.toThrow(/overlaps '\*\.acme\.test', registered to user 'bob'/);
  });

  test("what does not overlap is registered: two labels under, the base, a narrower wildcard", async () => {
    const { core, alice, bob } = await setUp();
    await core.hostnames.create("*.acme.test", bob, true);
    for (const name of ["x.y.acme.test", "acme.test", "*.y.acme.test", "demo.acme.testing"]) {
      expect((await core.hostnames.create(name, alice, true)).hostname).toBe(name);
    }
  });

  test("one user may hold a wildcard and names under it, in either order", async () => {
    const { core, alice } = await setUp();
    await core.hostnames.create("first.acme.test", alice, false);
    await core.hostnames.create("*.acme.test", alice, true);
    await core.hostnames.create("second.acme.test", alice, true);
    expect((await core.hostnames.list(alice)).map((h) => h.hostname)).toEqual(["first.acme.test", "*.acme.test", "second.acme.test"]);
  });

  test("the same hostname is still HOSTNAME_TAKEN, whoever asks", async () => {
    const { core, alice, bob } = await setUp();
    await core.hostnames.create("*.acme.test", alice, true);
    await expect(core.hostnames.create("*.acme.test", bob, true)).rejects.toMatchObject({ code: "HOSTNAME_TAKEN" });
    await expect(core.hostnames.create("*.acme.test", alice, true)).rejects.toMatchObject({ code: "HOSTNAME_TAKEN" });
  });
});

describe("hostname overlap: rows that overlap from before the rule (who may use a name)", () => {
  test("another user's exact name, verified or pending, beats a wildcard: the wildcard's owner is refused it", async () => {
    const { core, alice, bob, legacy } = await setUp();
    await legacy("demo.acme.test", alice, true);
    await legacy("pending.acme.test", alice, false);
    await legacy("*.acme.test", bob, true);
    expect(await core.hostnames.standing(bob, "demo.acme.test")).toEqual({ refused: "another user's" });
    expect(await core.hostnames.standing(bob, "pending.acme.test")).toEqual({ refused: "another user's" });
    expect(await core.hostnames.verifiedFor(bob, "demo.acme.test")).toBeUndefined();
    // the rest of the wildcard is still bob's
    expect(await core.hostnames.standing(bob, "other.acme.test")).toEqual({ grantedBy: "*.acme.test" });
    // and the exact name its owner's; the pending one nobody's until it is verified
    expect(await core.hostnames.standing(alice, "demo.acme.test")).toEqual({ grantedBy: "demo.acme.test" });
    expect(await core.hostnames.standing(alice, "pending.acme.test")).toEqual({ refused: "not verified" });
    expect(await core.hostnames.standing(alice, "other.acme.test")).toEqual({ refused: "not verified" });
  });

  test("registered the other way round (the exact name after the wildcard), the exact name still wins", async () => {
    const { core, alice, bob, legacy } = await setUp();
    await legacy("*.acme.test", bob, true);
    await legacy("demo.acme.test", alice, false);
    expect(await core.hostnames.standing(bob, "demo.acme.test")).toEqual({ refused: "another user's" });
  });

  test("a user's own pending name under their own verified wildcard is theirs by the wildcard", async () => {
    const { core, alice } = await setUp();
    await core.hostnames.create("*.acme.test", alice, true);
    await core.hostnames.create("demo.acme.test", alice, false);
    expect(await core.hostnames.standing(alice, "demo.acme.test")).toEqual({ grantedBy: "*.acme.test" });
    expect(await core.hostnames.standing(alice, "x.y.acme.test")).toEqual({ refused: "not verified" });
  });
});
