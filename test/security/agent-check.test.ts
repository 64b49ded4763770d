/**
 * Class: the agent's check (POST /_burrow/check, what `burrow diagnose`
 * asks) as a way around the handshake's rules. It takes a token like a
 * HELLO, so it must not be a side door for guessing tokens: its bad tokens
 * and malformed bodies count against the address in the handshake
 * throttle, a locked address is refused there as on the WebSocket (and
 * the other way round), and a body past its bound is refused unread. And
 * it must change nothing: a tunnel it judges is neither opened nor
 * declared (a private tunnel it checks is not shared with anyone after).
 * Asked with `remote` (`burrow diagnose --remote`), it answers the token's
 * own device's remote config, which may hold passwords: to that token
 * only, never to a bad, revoked or other user's token.
 *
 * Each client address is its own 127.0.0.x (all loopback on Linux).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { MAX_CHECK_BYTES } from "../../src/protocol/agent-check.ts";
import { CHECK_PATH, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";

const LIMIT = 5;
const BAD_TOKEN = "brw_" + "x".repeat(43);

interface Answered {
  status: number;
  headers: string;
  body: any;
}

/** One POST of the check from `from`, by hand (Bun's fetch cannot choose its local address); its answer. */
function postCheck(port: number, body: string, from: string, declaredLength = Buffer.byteLength(body)): Promise<Answered> {
  return new Promise((resolve, reject) => {
    let got = Buffer.alloc(0);
    const timer = setTimeout(() => (sock.destroy(), reject(new Error("no answer to the check within 10 s"))), 10_000);
    const sock: Socket = connect({ host: "127.0.0.1", port, localAddress: from }, () => {
      sock.write(`POST ${CHECK_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: ${declaredLength}\r\n\r\n${body}`);
    });
    sock.on("data", (b: Buffer) => (got = Buffer.concat([got, b])));
    sock.on("error", () => {});
    sock.on("close", () => {
      clearTimeout(timer);
      const text = got.toString();
      const end = text.indexOf("\r\n\r\n");
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1] ?? 0);
      let parsed: unknown = text.slice(end + 4);
      try {
        parsed = JSON.parse(parsed as string);
      } catch {}
      resolve({ status, headers: text.slice(0, end), body: parsed });
    });
  });
}

const check = (token: string, tunnels: unknown[] = []) => JSON.stringify({ version: PROTOCOL_VERSION, token, tunnels });

describe(`the agent's check and the handshake throttle (--handshake-limit ${LIMIT})`, () => {
  let server: TestServer;
  let api: AdminClient;
  let token: string;
  let bobToken: string;

  beforeAll(async () => {
    server = await startServer({ args: ["--handshake-limit", String(LIMIT)] });
    api = await signedIn(server);
    token = await api.createToken(await api.createUser("alice"));
    bobToken = await api.createToken(await api.createUser("bob"));
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("bad tokens at the check lock the address: then even a good token is refused there, and so is a HELLO", async () => {
    const from = "127.0.0.41";
    for (let i = 0; i < LIMIT; i++) {
      const a = await postCheck(server.edgePort, check(BAD_TOKEN), from);
      expect(a.status).toBe(401);
      expect(a.body.code).toBe("AUTH_FAILED");
    }
    const locked = await postCheck(server.edgePort, check(token), from);
    expect(locked.status).toBe(429);
    expect(locked.body.code).toBe("RATE_LIMITED");
    expect(locked.headers).toMatch(/\r\nretry-after: \d+/i);
    const hello = await sayHello({ port: server.edgePort, via: "websocket", from, token });
    expect(hello.refusal?.code).toBe("RATE_LIMITED");
    // another address is not concerned
    expect((await postCheck(server.edgePort, check(token), "127.0.0.42")).status).toBe(200);
  });

  test("failed HELLOs lock the check too", async () => {
    const from = "127.0.0.43";
    for (let i = 0; i < LIMIT; i++) expect((await sayHello({ port: server.edgePort, via: "websocket", from, token: BAD_TOKEN })).refusal?.code).toBe("AUTH_FAILED");
    const a = await postCheck(server.edgePort, check(token), from);
    expect(a.status).toBe(429);
    expect(a.body.code).toBe("RATE_LIMITED");
  });

  test("bodies that are not a check count as failed handshakes, as a malformed HELLO does", async () => {
    const from = "127.0.0.44";
    for (let i = 0; i < LIMIT; i++) {
      const a = await postCheck(server.edgePort, "{not json", from);
      expect(a.status).toBe(400);
      expect(a.body.code).toBe("BAD_REQUEST");
    }
    expect((await postCheck(server.edgePort, check(token), from)).status).toBe(429);
  });

  test("a body past its bound is refused before it is read", async () => {
    const a = await postCheck(server.edgePort, "", "127.0.0.45", MAX_CHECK_BYTES + 1);
    expect(a.status).toBe(400);
    expect(a.body.error).toContain(`larger than ${MAX_CHECK_BYTES} bytes`);
  });

  test("a good token's answers: its user, and a refused tunnel by its code; a protocol it does not speak is said first", async () => {
    const a = await postCheck(server.edgePort, check(token, [{ protocol: "http", subdomain: "www" }, { protocol: "http", subdomain: "check-free" }]), "127.0.0.46");
    expect(a.status).toBe(200);
    expect(a.body.user.username).toBe("alice");
    expect(a.body.tunnels).toEqual([
      { index: 0, ok: false, code: "SUBDOMAIN_RESERVED", message: "'www' is a system name" },
      { index: 1, ok: true, subdomain: "check-free" },
    ]);
    const old = await postCheck(server.edgePort, JSON.stringify({ version: PROTOCOL_VERSION - 1, token }), "127.0.0.46");
    expect(old.status).toBe(409);
    expect(old.body.code).toBe("VERSION_MISMATCH");
  });

  test("asked with remote, a token gets its own device's remote config and no one else's: a bad, a revoked or another's token gets none of it", async () => {
    const carol = await api.createUser("carol-config");
    const made = await api.post(`/api/users/${carol}/tokens`, { device_name: "router" });
    const secret = "carols-remote-pw";
    expect((await api.put(`/api/tokens/${made.body.token_id}/config`, { tunnels: { site: { proto: "http", addr: 8080, basic_auth: [`ann:${secret}`] } } })).status).toBe(200);
    const remote = (t: string) => JSON.stringify({ version: PROTOCOL_VERSION, token: t, remote: true });
    const own = await postCheck(server.edgePort, remote(made.body.token), "127.0.0.49");
    expect(own.status).toBe(200);
    expect(own.body.remote_config.version).toBe(1);
    expect(own.body.remote_config.tunnels.site.basic_auth).toEqual([`ann:${secret}`]);
    // not asked for: not sent
    expect((await postCheck(server.edgePort, check(made.body.token), "127.0.0.49")).body.remote_config).toBeUndefined();
    // another user's token: their own (none), not carol's
    const bobs = await postCheck(server.edgePort, remote(bobToken), "127.0.0.49");
    expect(bobs.body.remote_config).toEqual({ version: 0, tunnels: {} });
    const bad = await postCheck(server.edgePort, remote(BAD_TOKEN), "127.0.0.50");
    expect(bad.status).toBe(401);
    expect((await api.delete(`/api/tokens/${made.body.token_id}`)).status).toBe(200);
    const revoked = await postCheck(server.edgePort, remote(made.body.token), "127.0.0.50");
    expect(revoked.status).toBe(403);
    for (const a of [bobs, bad, revoked]) expect(JSON.stringify(a.body)).not.toContain(secret);
  });

  test("it changes nothing: a private tunnel it judged is not declared, so its share reaches nobody", async () => {
    const a = await postCheck(server.edgePort, check(token, [{ protocol: "tcp", private: { name: "checked-db", share: ["bob"] } }]), "127.0.0.47");
    expect(a.status).toBe(200);
    expect(a.body.tunnels[0].ok).toBe(true);
    // bob's connector: a declared and shared tunnel whose owner is away is TUNNEL_OFFLINE; one never declared NOT_SHARED
    const payload = jsonPayload({ version: PROTOCOL_VERSION, token: bobToken, tunnels: [], connect: { target: "alice/checked-db" } });
    const connector = await sayHello({ port: server.edgePort, via: "websocket", from: "127.0.0.48", payload });
    expect(connector.refusal?.code).toBe("NOT_SHARED");
    // and a name it judged free is free for anyone
    const other = await postCheck(server.edgePort, check(bobToken, [{ protocol: "http", subdomain: "check-free" }]), "127.0.0.48");
    expect(other.body.tunnels[0]).toEqual({ index: 0, ok: true, subdomain: "check-free" });
  });
});
