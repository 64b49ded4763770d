/**
 * What expires with time, on a real database and a fake clock: an invitation
 * past its hours, a device login's code past its life (the device is told
 * expired_token, the user's approve finds nothing), a session past its idle
 * time; and the sweep that deletes expired codes.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";

let opened: OpenedDb | undefined;
let dir: string | undefined;

afterEach(() => {
  opened?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

function coreAt(start: string) {
  dir = mkdtempSync(join(tmpdir(), "burrow-expiry-"));
  opened = openDatabase(dir);
  let now = Date.parse(start);
  const core = createCore({ store: opened.store, systemSubdomains: [], clock: { now: () => new Date(now) } });
  return { core, advance: (ms: number) => (now += ms) };
}

test("an invitation works until its hours are up, then is 410 and listed expired", async () => {
  const { core, advance } = coreAt("2026-11-01T00:00:00Z");
  const { secret, invitation } = await core.invitations.create({ maxTunnels: 2 }, { hours: 24, note: "" });
  expect((await core.invitations.describe(secret, "192.0.2.1")).settings.maxTunnels).toBe(2);
  advance(24 * 3600_000);
  await expect(core.invitations.describe(secret, "192.0.2.1")).rejects.toMatchObject({ code: "INVITATION_INVALID" });
  await expect(core.invitations.accept(secret, "192.0.2.1", { username: "late", password: "a-good-password" })).rejects.toMatchObject({ code: "INVITATION_INVALID" });
  expect((await core.invitations.get(invitation.id)).status).toBe("expired");
  expect(await core.users.byName("late")).toBeUndefined();
});

test("a device code past its life: the poll says expired_token, approving finds nothing, and the sweep deletes it", async () => {
  const { core, advance } = coreAt("2026-11-01T00:00:00Z");
  const user = await core.users.create({ username: "alice", password: "a-good-password" });
  const codes = await core.deviceLogin.start("laptop", "192.0.2.1");
  expect((await core.deviceLogin.find(codes.userCode, user, "192.0.2.9")).deviceName).toBe("laptop");
  advance(10 * 60_000);
  await expect(core.deviceLogin.approve(codes.userCode, user, "192.0.2.9")).rejects.toMatchObject({ code: "NOT_FOUND" });
  expect(await core.deviceLogin.poll(codes.deviceCode)).toMatchObject({ kind: "wait", error: "expired_token" });
  // the expired poll deleted it; another expired one goes by the sweep
  const other = await core.deviceLogin.start("desk", "192.0.2.1");
  advance(11 * 60_000);
  await core.deviceLogin.sweep();
  expect(await core.deviceLogin.poll(other.deviceCode)).toMatchObject({ kind: "wait", error: "invalid_grant" });
});

test("a portal session ends after 24 h without use, as an admin's does", async () => {
  const { core, advance } = coreAt("2026-11-01T00:00:00Z");
  const user = await core.users.create({ username: "bob", password: "a-good-password" });
  const key = await core.sessions.start(user.id, "portal");
  expect((await core.sessions.resolvePortal(key)).username).toBe("bob");
  await expect(core.sessions.resolve(key)).rejects.toMatchObject({ code: "UNAUTHORIZED" });
  advance(24 * 3600_000 + 1);
  await expect(core.sessions.resolvePortal(key)).rejects.toMatchObject({ code: "UNAUTHORIZED" });
});
