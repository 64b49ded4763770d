/**
 * The handshake throttle, against the real server over real loopback
 * sockets. Failed handshakes (a wrong or revoked token, a HELLO that is not
 * a Hello) are counted per client address; past --handshake-limit that
 * address is refused RATE_LIMITED at once, whatever its HELLO says, on the
 * WebSocket and the direct port alike, while agents from other addresses
 * come and stay as usual. Refusals are logged once per address a minute,
 * not once each. Behind --trusted-proxies, X-Forwarded-For names the
 * address that is counted; without it, the header changes nothing.
 *
 * Every client address below is its own 127.0.0.x (all loopback on Linux);
 * real agents come from 127.0.0.1, which only the last two groups throttle.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch } from "../harness/agent.ts";
import { sayHello, type HelloAnswer, type HelloOptions } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { jsonPayload } from "../../src/protocol/frames.ts";

const LIMIT = 5;
const TEST_MS = 20_000;
/** The first lock is 30 s: a refusal says so, give or take the second it is rounded to. */
const FIRST_LOCK_S = 30;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream ${new URL(req.url).pathname}`) });
afterAll(() => void upstream.stop(true));

/** `n` handshakes one after another (each answered and closed before the next); their answers. */
async function hellos(n: number, opts: HelloOptions | ((i: number) => HelloOptions)): Promise<HelloAnswer[]> {
  const out: HelloAnswer[] = [];
  for (let i = 0; i < n; i++) out.push(await sayHello(typeof opts === "function" ? opts(i) : opts));
  return out;
}

const codes = (answers: HelloAnswer[]) => answers.map((a) => a.refusal?.code ?? a.type);

/** A RATE_LIMITED refusal as it should be: a sentence with the wait, retry_after in seconds, then close. */
function expectRateLimited(a: HelloAnswer, address: string): void {
  expect(a.refusal?.code).toBe("RATE_LIMITED");
  expect(a.refusal?.message).toMatch(new RegExp(`^too many failed handshakes from ${address.replaceAll(".", "\\.")}; try again in \\d+ s$`));
  expect(a.refusal?.retry_after).toBeGreaterThanOrEqual(FIRST_LOCK_S - 5);
  expect(a.refusal?.retry_after).toBeLessThanOrEqual(FIRST_LOCK_S);
  expect(a.refusal?.message).toContain(`in ${a.refusal?.retry_after} s`);
  expect(a.closed).toBe(true);
}

/** Server log lines matching `pattern`. */
const logLines = (server: TestServer, pattern: RegExp) => server.output.lines.filter((l) => pattern.test(l));

/** Waits (bounded) for the server to log a refusal of `address`: every earlier line is in by then. */
async function refusalLogged(server: TestServer, address: string, code: string): Promise<void> {
  await server.output.waitFor(new RegExp(`agent refused code=${code} .*address=${address.replaceAll(".", "\\.")}$`), 5_000);
}

describe(`--handshake-limit ${LIMIT}, no trusted proxies`, () => {
  let server: TestServer;
  let api: AdminClient;
  let token: string;
  let userId: number;

  beforeAll(async () => {
    server = await startServer({ args: ["--handshake-limit", String(LIMIT)] });
    api = await signedIn(server);
    userId = await api.createUser("throttled");
    token = await api.createToken(userId);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test(
    "over the WebSocket: LIMIT wrong tokens get AUTH_FAILED, then RATE_LIMITED at once, even for a valid token; agents elsewhere carry on",
    async () => {
      await using before = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      const ws = { port: server.edgePort, via: "websocket", from: "127.0.0.3" } as const;

      const failed = await hellos(LIMIT, ws);
      expect(codes(failed)).toEqual(Array(LIMIT).fill("AUTH_FAILED"));
      for (const a of failed) expect(a.closed).toBe(true);

      const refused = await hellos(10, ws);
      for (const a of refused) expectRateLimited(a, "127.0.0.3");
      // no token is looked at, and no HELLO even parsed: a valid token and a HELLO that is not JSON get the same
      expectRateLimited(await sayHello({ ...ws, token }), "127.0.0.3");
      expectRateLimited(await sayHello({ ...ws, payload: new TextEncoder().encode("{nope") }), "127.0.0.3");
      // one count for both ways in: the direct port refuses the address too
      expectRateLimited(await sayHello({ port: server.agentPort!, via: "direct", from: "127.0.0.3", token }), "127.0.0.3");

      // the agent that was up is still up, and a new one from another address comes up as usual
      expect((await tunnelFetch(server.edgePort, before.subdomain!, "/still")).status).toBe(200);
      await using after = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      expect(await (await tunnelFetch(server.edgePort, after.subdomain!, "/after")).text()).toBe("upstream /after");
      expect(before.output.text()).not.toContain("reconnecting");
      const fine = await sayHello({ port: server.edgePort, via: "websocket", from: "127.0.0.1", token });
      expect(fine.type).toBe("READY");

      // the log: one line per failure up to the limit, then one line for the address, not one per refusal
      await server.output.waitFor(new RegExp(`agent connected .*tunnels=http://${after.subdomain}\\.`), 5_000);
      expect(logLines(server, /agent refused .*address=127\.0\.0\.3$/)).toHaveLength(LIMIT);
      const throttled = logLines(server, /agent handshakes throttled address=127\.0\.0\.3 /);
      expect(throttled).toHaveLength(1);
      expect(throttled[0]).toMatch(/ refused=1$/);
      expect(logLines(server, /RATE_LIMITED/)).toEqual([]);
    },
    TEST_MS,
  );

  test(
    "over the direct port: wrong and revoked tokens count alike, then RATE_LIMITED on the direct port and the WebSocket",
    async () => {
      const revokedUser = await api.createUser("revoked");
      const revoked = await api.createToken(revokedUser);
      const tokenId = (await api.get(`/api/users/${revokedUser}/tokens`)).body[0].id;
      expect((await api.delete(`/api/tokens/${tokenId}`)).status).toBe(200);

      const direct = { port: server.agentPort!, via: "direct", from: "127.0.0.4" } as const;
      const failed = await hellos(LIMIT, (i) => ({ ...direct, token: i % 2 ? revoked : undefined }));
      expect(codes(failed)).toEqual(Array.from({ length: LIMIT }, (_, i) => (i % 2 ? "TOKEN_DISABLED" : "AUTH_FAILED")));
      for (const a of await hellos(5, direct)) expectRateLimited(a, "127.0.0.4");
      expectRateLimited(await sayHello({ ...direct, token }), "127.0.0.4");
      expectRateLimited(await sayHello({ port: server.edgePort, via: "websocket", from: "127.0.0.4", token }), "127.0.0.4");

      // another address on the direct port is admitted
      expect((await sayHello({ ...direct, from: "127.0.0.1", token })).type).toBe("READY");
      await refusalLogged(server, "127.0.0.4", "AUTH_FAILED");
      await server.output.waitFor(/agent handshakes throttled address=127\.0\.0\.4 refused=1$/, 5_000);
    },
    TEST_MS,
  );

  test(
    "a HELLO that is not JSON, or not a Hello, counts as a failure too",
    async () => {
      const ws = { port: server.edgePort, via: "websocket", from: "127.0.0.5" } as const;
      const bad = [new TextEncoder().encode("{nope"), jsonPayload({ version: 1 }), jsonPayload([1, 2, 3])];
      const failed = await hellos(LIMIT, (i) => ({ ...ws, payload: bad[i % bad.length] }));
      expect(codes(failed)).toEqual(Array(LIMIT).fill("PROTOCOL_ERROR"));
      expectRateLimited(await sayHello({ ...ws, token }), "127.0.0.5");
    },
    TEST_MS,
  );

  test(
    "refusals that are not about the token do not count: a wrong protocol version, many times, then the token still gets in",
    async () => {
      const ws = { port: server.edgePort, via: "websocket", from: "127.0.0.6" } as const;
      const old = jsonPayload({ version: 999, token, tunnels: [{ protocol: "http" }] });
      expect(codes(await hellos(LIMIT * 2, { ...ws, payload: old }))).toEqual(Array(LIMIT * 2).fill("VERSION_MISMATCH"));
      expect((await sayHello({ ...ws, token })).type).toBe("READY");
    },
    TEST_MS,
  );

  test(
    "a successful handshake does not wipe the count: LIMIT - 1 failures, a success, one more failure locks",
    async () => {
      const ws = { port: server.edgePort, via: "websocket", from: "127.0.0.7" } as const;
      expect(codes(await hellos(LIMIT - 1, ws))).toEqual(Array(LIMIT - 1).fill("AUTH_FAILED"));
      expect((await sayHello({ ...ws, token })).type).toBe("READY");
      expect((await sayHello(ws)).refusal?.code).toBe("AUTH_FAILED");
      expectRateLimited(await sayHello({ ...ws, token }), "127.0.0.7");
    },
    TEST_MS,
  );

  test(
    "without --trusted-proxies an X-Forwarded-For header is ignored: a new one on every try is still one address",
    async () => {
      const from = (i: number): HelloOptions => ({
        port: server.edgePort,
        via: "websocket",
        from: "127.0.0.8",
        headers: { "X-Forwarded-For": `198.51.100.${i + 1}` },
      });
      expect(codes(await hellos(LIMIT, from))).toEqual(Array(LIMIT).fill("AUTH_FAILED"));
      expectRateLimited(await sayHello({ ...from(99), token }), "127.0.0.8");
      await server.output.waitFor(/agent handshakes throttled address=127\.0\.0\.8 refused=1$/, 5_000);
      expect(logLines(server, /198\.51\.100\./)).toEqual([]);
    },
    TEST_MS,
  );
});

describe("behind --trusted-proxies 127.0.0.1", () => {
  const limit = 3;
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    server = await startServer({ args: ["--handshake-limit", String(limit), "--trusted-proxies", "127.0.0.1"] });
    const api = await signedIn(server);
    token = await api.createToken(await api.createUser("proxied"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  test(
    "X-Forwarded-For on the upgrade names the address counted: two clients are throttled apart, and the proxy itself is not locked",
    async () => {
      const via = (xff?: string, from = "127.0.0.1"): HelloOptions => ({
        port: server.edgePort,
        via: "websocket",
        from,
        headers: xff === undefined ? {} : { "X-Forwarded-For": xff },
      });
      expect(codes(await hellos(limit, via("203.0.113.7")))).toEqual(Array(limit).fill("AUTH_FAILED"));
      expectRateLimited(await sayHello({ ...via("203.0.113.7"), token }), "203.0.113.7");
      // the rightmost hop that is not a trusted proxy is the client
      expectRateLimited(await sayHello({ ...via("10.9.9.9, 203.0.113.7, 127.0.0.1"), token }), "203.0.113.7");

      // another client behind the same proxy has its own count
      expect((await sayHello(via("203.0.113.8"))).refusal?.code).toBe("AUTH_FAILED");
      expect((await sayHello({ ...via("203.0.113.8"), token })).type).toBe("READY");
      // the proxy's own connections (no header) and a real agent through it are not locked
      expect((await sayHello({ ...via(), token })).type).toBe("READY");
      await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      expect(await (await tunnelFetch(server.edgePort, agent.subdomain!, "/ok")).text()).toBe("upstream /ok");

      // a peer that is not trusted cannot hide behind the header, nor borrow someone else's lock
      expect((await sayHello({ ...via("203.0.113.7", "127.0.0.9"), token })).type).toBe("READY");

      await refusalLogged(server, "203.0.113.8", "AUTH_FAILED");
      await server.output.waitFor(/agent handshakes throttled address=203\.0\.113\.7 refused=1$/, 5_000);
      expect(logLines(server, /agent refused .*address=203\.0\.113\.7$/)).toHaveLength(limit);
      expect(logLines(server, /agent handshakes throttled address=127\.0\.0\.1 /)).toEqual([]);
    },
    TEST_MS,
  );
});

describe("an agent refused RATE_LIMITED", () => {
  let server: TestServer;
  let token: string;

  beforeAll(async () => {
    server = await startServer({ args: ["--handshake-limit", "2"] });
    const api = await signedIn(server);
    token = await api.createToken(await api.createUser("patient"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  test(
    "prints the refusal, waits as long as the server says instead of exiting or hammering, and Ctrl-C still ends it with 0",
    async () => {
      // 127.0.0.1, where the agent comes from, is locked by someone else's bad tokens
      const ws = { port: server.edgePort, via: "websocket" } as const;
      expect(codes(await hellos(2, ws))).toEqual(["AUTH_FAILED", "AUTH_FAILED"]);
      expectRateLimited(await sayHello({ ...ws, token }), "127.0.0.1");

      const { proc, output, home } = spawnAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      try {
        const refusal = await output.waitFor(/^burrow: refused by the server: RATE_LIMITED: /, 10_000);
        expect(refusal).toMatch(/too many failed handshakes from 127\.0\.0\.1; try again in \d+ s$/);
        const line = await output.waitFor(/RATE_LIMITED; reconnecting in [\d.]+ s \(attempt 1\)$/, 10_000);
        const waitS = Number(/reconnecting in ([\d.]+) s/.exec(line)![1]);
        expect(waitS).toBeGreaterThanOrEqual(FIRST_LOCK_S - 5);
        expect(waitS).toBeLessThanOrEqual(FIRST_LOCK_S + 1);
        expect(proc.exitCode).toBeNull();
        // one refusal, one line saying when it tries again; Ctrl-C during the wait ends it cleanly
        expect(output.lines.filter((l) => l.includes("RATE_LIMITED"))).toHaveLength(2);
        proc.kill("SIGINT");
        expect(await proc.exited).toBe(0);
      } finally {
        proc.kill("SIGKILL"); // a no-op once it has exited
        rmSync(home, { recursive: true, force: true });
      }
    },
    TEST_MS,
  );
});
