/**
 * Device codes counted by network, not by exact address: one host holds a
 * whole IPv6 /64 and may send from any address in it, so a limit per exact
 * address is no limit. What a client may do with the device login (RFC
 * 8628) is counted by its network as basic auth counts guesses (an IPv4
 * address, an IPv6 /64): codes asked for, wrong user codes typed, and its
 * share of the codes that may wait at once, so that one network cannot
 * fill the table every device asks into and starve the others.
 *
 * The server runs behind a trusted proxy (127.0.0.1) whose X-Forwarded-For
 * names the clients, as Caddy or nginx would: loopback has one IPv6
 * address. The share over time is checked on the rules themselves, on a
 * real database and a fake clock.
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { portalAs } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { createCore } from "../../src/core/index.ts";
import { CODES_PER_ADDRESS, PENDING_PER_NETWORK, WRONG_CODES_ALLOWED } from "../../src/core/device-login.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { DEVICE_CODE_PATH } from "../../src/protocol/wire.ts";

describe("device codes counted by network: the portal behind a trusted proxy", () => {
  let server: TestServer;
  let admin: AdminClient;

  beforeAll(async () => {
    server = await startServer({ args: ["--trusted-proxies", "127.0.0.1"] });
    admin = await signedIn(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  /** POST /_burrow/device/code as the client `from` (through the trusted proxy). */
  const askCode = (from: string) =>
    fetch(`http://localhost:${server.edgePort}${DEVICE_CODE_PATH}`, {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Forwarded-For": from },
      body: JSON.stringify({ device_name: "laptop" }),
    });

  test("device codes counted by network: an IPv6 client asking from a new address of its /64 each time is one client; another /64 and an IPv4 client are not held up", async () => {
    for (let i = 1; i <= CODES_PER_ADDRESS; i++) {
      const res = await askCode(`2001:db8:1:2:${i.toString(16)}::${i.toString(16)}`);
      expect(res.status).toBe(200);
    }
    const next = await askCode("2001:db8:1:2:ffff:ffff:ffff:ffff");
    expect(next.status).toBe(429);
    expect(Number(next.headers.get("retry-after"))).toBeGreaterThan(0);
    expect((await askCode("2001:db8:1:3::1")).status).toBe(200);
    expect((await askCode("203.0.113.7")).status).toBe(200);
  });

  test("device codes counted by network: wrong user codes typed from one /64, by different users, add up to one network's allowance", async () => {
    const statuses: number[] = [];
    for (let i = 0; i <= WRONG_CODES_ALLOWED; i++) {
      await admin.createUser(`typist${i}`);
      const portal = await portalAs(server.edgePort, `typist${i}`);
      const res = await portal.call("GET", "/_burrow/api/device?user_code=BCDF-GHJK", undefined, { "X-Forwarded-For": `2001:db8:7:7::${(i + 1).toString(16)}` });
      statuses.push(res.status);
    }
    expect(statuses).toEqual([...Array(WRONG_CODES_ALLOWED).fill(404), 429]);
  });
});

describe("device codes counted by network: the share of codes waiting, over time", () => {
  let opened: OpenedDb | undefined;
  let dir: string | undefined;
  afterEach(() => {
    opened?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test("device codes counted by network: a /64 holding its share of codes waiting is refused even when the rate would let it ask; a code used makes room; other networks are served", async () => {
    dir = mkdtempSync(join(tmpdir(), "burrow-device-share-"));
    opened = openDatabase(dir);
    let now = Date.parse("2026-11-01T00:00:00Z");
    const core = createCore({ store: opened.store, systemSubdomains: [], clock: { now: () => new Date(now) }, deviceCodeTtlMs: 3600_000 });
    const from = (i: number) => `2001:db8:9:9::${(i + 1).toString(16)}`;
    const codes = [];
    for (let i = 0; i < PENDING_PER_NETWORK; i++) codes.push(await core.deviceLogin.start("d", from(i)));
    // the rate: the 30th locked the network for a minute
    await expect(core.deviceLogin.start("d", from(100))).rejects.toMatchObject({ code: "TOO_MANY_REQUESTS", message: expect.stringMatching(/^too many device logins from this address/) });
    now += 60_000;
    // the rate would let one more through now; the share does not: 30 are waiting (for an hour)
    await expect(core.deviceLogin.start("d", from(101))).rejects.toMatchObject({ code: "TOO_MANY_REQUESTS", message: expect.stringMatching(/^too many device logins are waiting from this address/) });
    // one is approved and its device takes the token: the network has room for one again
    const user = await core.users.create({ username: "sam", password: "sams-password" });
    await core.deviceLogin.approve(codes[0]!.userCode, user, "198.51.100.9");
    expect((await core.deviceLogin.poll(codes[0]!.deviceCode)).kind).toBe("token");
    now += 120_000; // past the rate's second lock
    expect((await core.deviceLogin.start("d", from(102))).userCode).toHaveLength(8);
    // other networks were never held up
    expect((await core.deviceLogin.start("other", "2001:db8:9:a::1")).userCode).toHaveLength(8);
    expect((await core.deviceLogin.start("other", "198.51.100.1")).userCode).toHaveLength(8);
  });
});
