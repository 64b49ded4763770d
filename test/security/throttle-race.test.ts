/**
 * Throttles beaten by concurrency: a throttle that checks "is this key
 * locked?", then awaits a slow check (argon2, a database lookup), then
 * counts the failure lets every attempt of a burst pass its check before
 * the first one fails. Each throttle that guards an asynchronous check
 * reserves the attempt first (it counts as a failure until it succeeds), so
 * a burst gets no more verdicts than the allowance, and the right secret
 * sent after a burst of wrong ones meets the lock.
 *
 * Against the real server: the admin API's login, the portal's, agents'
 * handshakes, device codes typed on the portal, invitation links (these
 * three on PostgreSQL, whose lookups leave the window open); each burst
 * written on connections opened first, so the server reads it at once. (Tunnels' basic auth judges a header with no await in between:
 * nothing to race there; test/e2e/basic-auth-limit.test.ts holds its count.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { PortalClient, portalAs } from "../harness/portal.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { connect, type Socket } from "node:net";
import { helloGate, helloPayload, sayHello } from "../harness/raw-agent.ts";
import { encodeFrame } from "../../src/protocol/frames.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { rawHttpAtOnce } from "../harness/raw-http.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";

const HANDSHAKE_LIMIT = 5;
const TEST_MS = 30_000;

/** How many of each status. */
const tally = (statuses: (number | string)[]) => statuses.reduce<Record<string, number>>((t, s) => ({ ...t, [s]: (t[s] ?? 0) + 1 }), {});

/**
 * `n - 1` wrong logins at once, then (once the first of them is answered,
 * so that the burst is in) the right one, sent last: every status, in order.
 */
async function burstThenRight(login: (i: number) => Promise<{ status: number }>, n: number): Promise<number[]> {
  const wrong = Array.from({ length: n - 1 }, (_, i) => login(i).then((r) => r.status));
  await Promise.race(wrong);
  const right = login(n - 1).then((r) => r.status);
  return Promise.all([...wrong, right]);
}

/** One PostgreSQL server for the file, started when a test asks for it. */
let pg: Promise<TestPostgres> | undefined;
afterAll(async () => {
  await (await pg)?.stop();
});

/**
 * A server for one group of tests, and an admin signed in to it. On SQLite
 * a lookup answers before the next request is read (bun:sqlite is
 * synchronous), which hides a race; PostgreSQL's answers come over the
 * network, as in a cluster, and leave the window open.
 */
function serverPerTest(args: string[] = [], database: "sqlite" | "postgres" = "sqlite") {
  const it = {} as { server: TestServer; admin: AdminClient };
  beforeAll(async () => {
    const url = database === "postgres" ? await (await (pg ??= startPostgres())).newDatabase() : undefined;
    it.server = await startServer({ args: [...args, ...(url ? ["--database", url] : [])] });
    it.admin = await signedIn(it.server);
  }, 60_000);
  afterAll(async () => {
    await it.server?.stop();
  });
  return it;
}

describe("throttles beaten by concurrency: the admin API's login", () => {
  const it = serverPerTest();
  test(
    "39 wrong passwords at once for one username, then the right one: 5 are verified (401), the rest 429, the right one too; and it stays locked",
    async () => {
      const statuses = await burstThenRight((i) => new AdminClient(it.server.adminUrl).login("admin", i === 39 ? ADMIN_PASSWORD : `wrong-password-${i}`), 40);
      expect(tally(statuses)).toEqual({ 401: 5, 429: 35 });
      expect(statuses[39]).toBe(429);
      // the lock holds for the right password alone, after the burst
      const after = await new AdminClient(it.server.adminUrl).login("admin", ADMIN_PASSWORD);
      expect(after.status).toBe(429);
      expect(Number(after.headers.get("retry-after"))).toBeGreaterThan(0);
    },
    TEST_MS,
  );
});

describe("throttles beaten by concurrency: the portal's login", () => {
  const it = serverPerTest();
  test(
    "29 wrong passwords at once for one user, then the right one: 5 are verified, the rest 429, the right one too",
    async () => {
      await it.admin.createUser("carol");
      const statuses = await burstThenRight((i) => new PortalClient(it.server.edgePort).login("carol", i === 29 ? "password-123" : `wrong-password-${i}`), 30);
      expect(tally(statuses)).toEqual({ 401: 5, 429: 25 });
      expect(statuses[29]).toBe(429);
      expect((await new PortalClient(it.server.edgePort).login("carol")).status).toBe(429);
    },
    TEST_MS,
  );
});

describe("throttles beaten by concurrency: agents' handshakes", () => {
  const it = serverPerTest(["--handshake-limit", String(HANDSHAKE_LIMIT)], "postgres");

  test(
    "30 HELLOs at once with wrong tokens from one address: 5 AUTH_FAILED, the rest RATE_LIMITED, then a valid token too",
    async () => {
      const token = await it.admin.createToken(await it.admin.createUser("fleet", { max_tunnels: 0 }));
      const from = "127.0.0.21";
      const gate = helloGate(30);
      const answers = await Promise.all(Array.from({ length: 30 }, () => sayHello({ port: it.server.agentPort!, via: "direct", from, gate })));
      expect(tally(answers.map((a) => a.refusal?.code ?? a.type))).toEqual({ AUTH_FAILED: HANDSHAKE_LIMIT, RATE_LIMITED: 30 - HANDSHAKE_LIMIT });
      const valid = await sayHello({ port: it.server.agentPort!, via: "direct", from, token });
      expect(valid.refusal?.code).toBe("RATE_LIMITED");
      expect(valid.refusal?.message).toMatch(/^too many failed handshakes from 127\.0\.0\.21; try again in \d+ s$/);
    },
    TEST_MS,
  );

  test(
    "30 HELLOs at once with wrong tokens from one address, each connection closed as soon as its HELLO is out: they count all the same, and a valid token after them is RATE_LIMITED",
    async () => {
      const token = await it.admin.createToken(await it.admin.createUser("hangup", { max_tunnels: 0 }));
      const from = "127.0.0.23";
      const sockets = await Promise.all(
        Array.from(
          { length: 30 },
          () =>
            new Promise<Socket>((resolve, reject) => {
              const sock = connect({ host: "127.0.0.1", port: it.server.agentPort!, localAddress: from }, () => resolve(sock));
              sock.on("error", reject);
            }),
        ),
      );
      const hello = encodeFrame(FrameType.HELLO, 0, helloPayload(`brw_${"y".repeat(43)}`));
      for (const sock of sockets) sock.end(hello);
      // every HELLO was read and judged (the server logs each refusal it makes, throttled ones summed up)
      await it.server.output.waitFor(/agent handshakes throttled address=127\.0\.0\.23 /, 10_000);
      const valid = await sayHello({ port: it.server.agentPort!, via: "direct", from, token });
      expect(valid.refusal?.code).toBe("RATE_LIMITED");
    },
    TEST_MS,
  );

  test(
    "a fleet behind one address, 30 HELLOs at once with a good token: all come in (in turns), none refused",
    async () => {
      const token = await it.admin.createToken(await it.admin.createUser("fleet2", { max_tunnels: 0 }));
      const gate = helloGate(30);
      const answers = await Promise.all(Array.from({ length: 30 }, () => sayHello({ port: it.server.agentPort!, via: "direct", from: "127.0.0.22", token, gate })));
      expect(tally(answers.map((a) => a.refusal?.code ?? a.type))).toEqual({ READY: 30 });
    },
    TEST_MS,
  );
});

describe("throttles beaten by concurrency: the portal's device codes and invitation links", () => {
  const it = serverPerTest([], "postgres");

  test(
    "30 wrong user codes at once from one signed-in user: 10 are looked up (404), the rest 429",
    async () => {
      await it.admin.createUser("dora");
      const dora = await portalAs(it.server.edgePort, "dora");
      const letters = "BCDFGHJKLMNPQRSTVWXZ";
      const requests = Array.from(
        { length: 30 },
        (_, i) => `GET /_burrow/api/device?user_code=BCDF-GH${letters[i % 20]}${letters[Math.floor(i / 20)]} HTTP/1.1\r\nHost: localhost:${it.server.edgePort}\r\nCookie: ${dora.cookie}\r\n\r\n`,
      );
      const replies = await rawHttpAtOnce(it.server.edgePort, requests);
      expect(tally(replies.map((r) => r.status))).toEqual({ 404: 10, 429: 20 });
    },
    TEST_MS,
  );

  test(
    "30 wrong invitation links at once from one address: 10 are looked up (410), the rest 429",
    async () => {
      const requests = Array.from({ length: 30 }, (_, i) => {
        const body = JSON.stringify({ invitation: `bri_${String(i).padStart(43, "x")}` });
        return `POST /_burrow/api/invitation HTTP/1.1\r\nHost: localhost:${it.server.edgePort}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`;
      });
      const replies = await rawHttpAtOnce(it.server.edgePort, requests);
      expect(tally(replies.map((r) => r.status))).toEqual({ 410: 10, 429: 20 });
    },
    TEST_MS,
  );
});
