/**
 * Private http and udp tunnels through `burrow connect`, with the real server
 * and agents: an http tunnel's service sees the connector's username in
 * X-Burrow-User (one the connector forges is dropped), over kept-alive
 * connections and with bodies; a head it cannot read is answered 400; a
 * udp tunnel's connector port carries datagrams both ways, one flow per
 * local sender. Revoking the connector's token, or disabling its user,
 * closes its live connections at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect as tcpConnect } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { heldRequest, startConnector, type TestConnector } from "../harness/connector.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let admin: AdminClient;
const tokens: Record<string, string> = {};
const userIds: Record<string, number> = {};
const connectors: TestConnector[] = [];

/** The owner's service: says who the request came from, as it read X-Burrow-User, and what it got. */
const service = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const body = await req.text();
    return Response.json({ user: req.headers.get("x-burrow-user"), method: req.method, path: new URL(req.url).pathname, body });
  },
});

/** The owner's UDP service: each datagram back with "echo:" before it. */
const udpService = await Bun.udpSocket({
  hostname: "127.0.0.1",
  port: 0,
  socket: { data: (s, data, port, address) => void s.send(Buffer.concat([Buffer.from("echo:"), data]), port, address) },
});

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  for (const name of ["alice", "bob", "carol"]) {
    userIds[name] = await admin.createUser(name, { allowed_protocols: "http,tcp,udp" });
    tokens[name] = await admin.createToken(userIds[name]!, `${name}-laptop`);
  }
});

afterAll(async () => {
  for (const c of connectors) await c[Symbol.asyncDispose]();
  service.stop(true);
  udpService.close();
  await server?.stop();
});

function connector(token: string, target: string): TestConnector {
  const c = startConnector({ server: server.edgeUrl, token, target });
  connectors.push(c);
  return c;
}

/** Sends `raw` on a new connection to 127.0.0.1:`port` and reads until the peer closes (or 5 s). */
function rawExchange(port: number, raw: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tcpConnect(port, "127.0.0.1", () => s.write(raw));
    let got = "";
    s.on("data", (d) => (got += d.toString()));
    s.on("error", reject);
    s.on("close", () => resolve(got));
    setTimeout(() => (s.destroy(), resolve(got)), 5_000);
  });
}

describe("a private http tunnel", () => {
  test("its service sees the connector's username in X-Burrow-User, and a forged one is dropped", async () => {
    await using owner = await startAgent({ kind: "http", target: service.port!, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "app", "--share", "bob"] });
    expect(owner.publicUrl).toBe("alice/app");
    const bob = connector(tokens.bob!, "alice/app");
    const port = await bob.port();
    await bob.output.waitFor(/Connected to alice\/app \(http\): open http:\/\/127\.0\.0\.1:\d+/, 5_000);
    const base = `http://127.0.0.1:${port}`;
    // several requests on one kept-alive connection, one with a body, one with a forged header in two spellings
    const first = await (await fetch(`${base}/one`)).json();
    expect(first).toEqual({ user: "bob", method: "GET", path: "/one", body: "" });
    const forged = await (await fetch(`${base}/two`, { method: "POST", body: "a body", headers: { "X-Burrow-User": "alice", "x-burrow-user": "root" } })).json();
    expect(forged).toEqual({ user: "bob", method: "POST", path: "/two", body: "a body" });
    // by hand, so nothing folds the forged lines together first
    const raw = await rawExchange(port, "GET /three HTTP/1.1\r\nHost: x\r\nX-Burrow-User: alice\r\nx-BURROW-user: admin\r\nConnection: close\r\n\r\n");
    expect(raw).toStartWith("HTTP/1.1 200");
    expect(JSON.parse(raw.slice(raw.indexOf("\r\n\r\n") + 4))).toMatchObject({ user: "bob", path: "/three" });
    // the owner reaches their own, as themselves
    const self = connector(tokens.alice!, "alice/app");
    expect(await (await fetch(`http://127.0.0.1:${await self.port()}/mine`)).json()).toMatchObject({ user: "alice" });
    // the owner's screen shows the requests
    await owner.output.waitFor(/POST\s+\/two/, 5_000);
  }, 60_000);

  test("a request head the service cannot be sent is answered 400, and the next connection works", async () => {
    await using _owner = await startAgent({ kind: "http", target: service.port!, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "app2", "--share", "bob"] });
    const bob = connector(tokens.bob!, "alice/app2");
    const port = await bob.port();
    const refused = await rawExchange(port, "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n");
    expect(refused).toStartWith("HTTP/1.1 400 Bad Request");
    const garbage = await rawExchange(port, "this is not http\r\n\r\n");
    expect(garbage).toStartWith("HTTP/1.1 400 Bad Request");
    expect(await (await fetch(`http://127.0.0.1:${port}/after`)).json()).toMatchObject({ user: "bob", path: "/after" });
  }, 60_000);

  test("refused with words: --subdomain and access rules do not go with --private", async () => {
    for (const extra of [["--subdomain", "pub"], ["--basic-auth", "u:secretsecret"]]) {
      const proc = Bun.spawn([process.execPath, "src/main.ts", "http", "3000", "--private", "--name", "x", ...extra, "--server", server.edgeUrl, "--token", tokens.alice!], { stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent" } });
      expect(await proc.exited).toBe(2);
      expect(await new Response(proc.stderr).text()).toContain("--private");
    }
  });

  test("revoking the connector's token closes its live connection at once", async () => {
    await using _owner = await startAgent({ kind: "http", target: service.port!, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "app3", "--share", "carol"] });
    const carolToken = await admin.createToken(userIds.carol!, "carol-revoked");
    const carol = connector(carolToken, "alice/app3");
    const port = await carol.port();
    const { closed } = await heldRequest(port);
    const tokenId = (await admin.get(`/api/users/${userIds.carol}/tokens`)).body.find((t: any) => t.device_name === "carol-revoked").id;
    expect((await admin.delete(`/api/tokens/${tokenId}`)).status).toBe(200);
    const revokedAt = performance.now();
    const closedAt = await Promise.race([closed, Bun.sleep(5_000).then(() => Infinity)]);
    // a liveness bound: the close is the revocation's own event, milliseconds on any machine
    expect(closedAt - revokedAt).toBeLessThan(1_000);
    expect(await carol.proc.exited).toBe(1);
  }, 60_000);
});

describe("disabling either user", () => {
  test("closes the live connections at once: the connector's user disabled, it exits; the owner's, its connectors wait", async () => {
    const daveId = await admin.createUser("dave", { allowed_protocols: "http,tcp,udp" });
    const ownerId = await admin.createUser("erin", { allowed_protocols: "http,tcp,udp" });
    const erinToken = await admin.createToken(ownerId, "erin-laptop");
    const owner = await startAgent({ kind: "http", target: service.port!, server: server.edgeUrl, token: erinToken, args: ["--private", "--name", "wiki", "--share", "dave,bob"] });
    try {
      const held = async (token: string) => {
        const c = connector(token, "erin/wiki");
        return { c, ...(await heldRequest(await c.port())) };
      };
      const dave = await held(await admin.createToken(daveId, "dave-laptop"));
      expect((await admin.put(`/api/users/${daveId}`, { enabled: false })).status).toBe(200);
      let at = performance.now();
      expect((await Promise.race([dave.closed, Bun.sleep(5_000).then(() => Infinity)])) - at).toBeLessThan(1_000);
      expect(await dave.c.proc.exited).toBe(1);
      expect(dave.c.output.text()).toContain("USER_DISABLED");

      const bob = await held(tokens.bob!);
      expect((await admin.put(`/api/users/${ownerId}`, { enabled: false })).status).toBe(200);
      at = performance.now();
      expect((await Promise.race([bob.closed, Bun.sleep(5_000).then(() => Infinity)])) - at).toBeLessThan(1_000);
      await bob.c.output.waitFor(/erin\/wiki is offline|NOT_SHARED/, 5_000);
    } finally {
      await owner.stop();
    }
  }, 60_000);
});

describe("a private udp tunnel", () => {
  test("the connector's UDP port carries datagrams both ways, one flow per local sender", async () => {
    await using owner = await startAgent({ kind: "udp", target: udpService.port, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "dns", "--share", "bob"], waitFor: /Private\s/ });
    expect(owner.output.text()).toContain("burrow connect alice/dns");
    const bob = connector(tokens.bob!, "alice/dns");
    const port = await bob.port();
    await bob.output.waitFor(/Connected to alice\/dns \(udp\): send to udp:\/\/127\.0\.0\.1:\d+/, 5_000);
    // two local senders, each answered on its own socket
    const replies: string[][] = [[], []];
    const senders = await Promise.all(
      [0, 1].map((i) => Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data: (_s, data) => void replies[i]!.push(data.toString()) } })),
    );
    try {
      const deadline = Date.now() + 10_000;
      // datagrams may be lost (UDP): sent again until each sender has its answer, bounded in time
      while ((replies[0]!.length === 0 || replies[1]!.length === 0) && Date.now() < deadline) {
        senders[0]!.send(`from zero`, port, "127.0.0.1");
        senders[1]!.send(`from one`, port, "127.0.0.1");
        await Bun.sleep(100);
      }
      expect(replies[0]).toContain("echo:from zero");
      expect(replies[1]).toContain("echo:from one");
      expect(replies[0]).not.toContain("echo:from one");
    } finally {
      for (const s of senders) s.close();
    }
    const active = (await admin.get("/api/tunnels/active")).body;
    expect(active.find((t: any) => t.private?.target === "alice/dns")).toMatchObject({ protocol: "udp", private: { shares: ["bob"], connected: 1 } });

    // --udp-flows 1: a second sender's flow ends the first; --udp-idle 1: a quiet flow ends, as the owner's agent sees them end
    const capped = startConnector({ server: server.edgeUrl, token: tokens.bob!, target: "alice/dns", args: ["--port", "0", "--udp-flows", "1", "--udp-idle", "1"] });
    connectors.push(capped);
    const cappedPort = await capped.port();
    const ended = () => owner.output.lines.filter((l) => /udp flow \S+ ended after/.test(l)).length;
    const before = ended();
    const [a, b] = await Promise.all([0, 1].map(() => Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data() {} } })));
    try {
      a!.send("from a", cappedPort, "127.0.0.1");
      await waitUntil(() => owner.output.lines.some((l) => l.includes(`udp flow from`)), 5_000, "a's flow open");
      await Bun.sleep(100);
      b!.send("from b", cappedPort, "127.0.0.1");
      // a's flow made room for b's; then b's, quiet, ends after a second
      await waitUntil(() => ended() >= before + 2, 10_000, "both flows ended");
    } finally {
      a!.close();
      b!.close();
    }
    const bad = startConnector({ server: server.edgeUrl, token: tokens.bob!, target: "alice/dns", args: ["--udp-idle", "0"] });
    connectors.push(bad);
    expect(await bad.proc.exited).toBe(2);
    await bad.output.closed();
    expect(bad.output.text()).toContain("--udp-idle must be a whole number from 1 to 86400 (got '0')");
  }, 60_000);
});
