/**
 * A tunnel added to a live session (core/admission.ts admitOnSession) is
 * admitted as the session's device as it is now, whichever kind of device
 * that is: a token (TOKEN_DISABLED once revoked) or an SSH key, known to
 * what is live by its id negated (KEY_REVOKED once removed), and never as
 * a token that happens to have the key's number. On a real core and
 * database.
 */
import { afterAll, beforeAll, describe, expect, spyOn, test } from "bun:test";
import { generateKeyPairSync } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { admitOnSession } from "../../src/core/admission.ts";
import { keyDevice } from "../../src/core/device-ids.ts";
import { AppError } from "../../src/core/errors.ts";
import { createCore, type Core } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { TrafficMeter } from "../../src/edge/meter.ts";
import { Registry } from "../../src/edge/registry.ts";

let dir: string;
let database: OpenedDb;
let core: Core;
let live: Registry;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "burrow-admit-on-session-"));
  const quiet = spyOn(console, "log").mockImplementation(() => {});
  try {
    database = openDatabase(dir);
  } finally {
    quiet.mockRestore();
  }
  core = createCore({ store: database.store, systemSubdomains: [] });
  live = new Registry(new TrafficMeter(core));
});
afterAll(() => {
  database?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** An ed25519 public key as a .pub file's line, made here (OpenSSH's wire format: the type, then the 32 bytes). */
function ed25519Line(comment: string): string {
  const raw = Buffer.from(generateKeyPairSync("ed25519").publicKey.export({ format: "jwk" }).x!, "base64url");
  const str = (b: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, b.length]), b]);
  return `ssh-ed25519 ${Buffer.concat([str(Buffer.from("ssh-ed25519")), str(raw)]).toString("base64")} ${comment}`;
}

const http = (subdomain: string) => ({ proxy: false, partial: true, tunnels: [{ protocol: "http" as const, subdomain }] });

async function refusalOf(p: Promise<unknown>): Promise<string | undefined> {
  try {
    await p;
    return undefined;
  } catch (err) {
    if (err instanceof AppError) return err.code;
    throw err;
  }
}

describe("admitOnSession: the session's device as it is now", () => {
  test("an SSH key's session is admitted as the key, its owner's rules applied", async () => {
    const user = await core.users.create({ username: "keyed", password: "admit-on-session-1", allowedProtocols: "http" });
    const key = await core.sshKeys.add(user, ed25519Line("keyed@laptop"));
    const admitted = await admitOnSession(core, keyDevice(key.id), http("keyed-b"), live);
    expect(admitted.user.id).toBe(user.id);
    expect(admitted.token).toMatchObject({ id: keyDevice(key.id), deviceName: "keyed@laptop" });
    expect(admitted.tunnels).toEqual([{ protocol: "http", subdomain: "keyed-b", skipWarning: false }]);
    // the owner's rules hold for it as for a token's tunnel
    expect(await refusalOf(admitOnSession(core, keyDevice(key.id), { proxy: false, partial: true, tunnels: [{ protocol: "tcp" }] }, live))).toBe("PROTOCOL_DENIED");
  });

  test("a key removed meanwhile: KEY_REVOKED, even where a token has the key's number", async () => {
    const user = await core.users.create({ username: "removed", password: "admit-on-session-2" });
    const key = await core.sshKeys.add(user, ed25519Line("removed@laptop"));
    // a token whose id is the key's id: the key's session must not be admitted as it
    let last = 0;
    for (let i = 0; i < 20 && last < key.id; i++) last = (await core.tokens.generate(user.id, `same-number-${i}`)).row.id;
    expect((await core.tokens.get(key.id)).enabled).toBe(true);
    await core.sshKeys.remove(key.id);
    expect(await refusalOf(admitOnSession(core, keyDevice(key.id), http("removed-b"), live))).toBe("KEY_REVOKED");
  });

  test("a token revoked meanwhile: TOKEN_DISABLED; one that never was: TOKEN_DISABLED", async () => {
    const user = await core.users.create({ username: "tokened", password: "admit-on-session-3" });
    const { row: made } = await core.tokens.generate(user.id, "router");
    const admitted = await admitOnSession(core, made.id, http("tokened-b"), live);
    expect(admitted.token).toMatchObject({ id: made.id, deviceName: "router" });
    await core.tokens.revoke(made.id);
    expect(await refusalOf(admitOnSession(core, made.id, http("tokened-c"), live))).toBe("TOKEN_DISABLED");
    expect(await refusalOf(admitOnSession(core, 987_654, http("tokened-d"), live))).toBe("TOKEN_DISABLED");
  });
});
