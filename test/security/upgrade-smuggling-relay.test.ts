/**
 * The h2c-smuggling class and the identity headers on the way between
 * nodes: a visitor on node r1 reaches a tunnel whose agent is on node r2
 * (one PostgreSQL, the relay link). The visitor's node does not know which
 * switches the tunnel allows, so the agent's node takes off the others; the
 * visitor's node judges the 101 as for its own tunnels.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { burrowLines, fieldOf, startNaiveService, type NaiveService } from "./naive-service.ts";
import { Raw } from "./raw-connection.ts";

/** A test's own bound: several waits of 5 s each (raw-connection.ts). */
setDefaultTimeout(30_000);
const SECRET = "relay-secret-for-smuggling-tests-0123456789";
const CREDENTIALS = `Basic ${Buffer.from("alice:open-sesame").toString("base64")}`;

let pg: TestPostgres;
let nodes: TestServer[] = [];
const agents: TestAgent[] = [];
let main: NaiveService;
let ws: NaiveService;

beforeAll(async () => {
  main = startNaiveService("main");
  ws = startNaiveService("ws");
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["r1", "r2"].map((id, i) =>
      startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET] }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("alice", { skip_warning: true }));
  const start = (target: number, args: string[]) => startAgent({ kind: "http", target, server: nodes[1]!.edgeUrl, token, args: ["--skip-warning", "--no-inspect", ...args] });
  agents.push(
    ...(await Promise.all([
      start(main.port, ["--subdomain", "relayed", "--route", `/ws=127.0.0.1:${ws.port}`, "--basic-auth", "alice:open-sesame", "--request-header-add", "X-Added: by-rule"]),
      start(main.port, ["--subdomain", "relayed-plain", "--route", `/ws=127.0.0.1:${ws.port}`]),
      start(ws.port, ["--subdomain", "relayed-h2c", "--allow-upgrade", "h2c"]),
    ])),
  );
}, 90_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  await pg?.stop();
  main?.stop();
  ws?.stop();
});

/** The visitors' node: not the agents'. */
const visitorPort = () => nodes[0]!.edgePort;

const upgradeHead = (path: string, token: string, host: string) =>
  `GET ${path} HTTP/1.1\r\nHost: ${host}.localhost:${visitorPort()}\r\nAuthorization: ${CREDENTIALS}\r\nConnection: Upgrade\r\nUpgrade: ${token}\r\n` +
  (token === "websocket" ? "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n" : "") +
  "\r\n";

const smuggled = (host: string) => `GET /admin/secret HTTP/1.1\r\nHost: ${host}.localhost\r\nX-Burrow-User-Email: ceo@corp.example\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n`;

describe("h2c smuggling through the relay between nodes", () => {
  for (const [host, token] of [
    ["relayed", "h2c"],
    ["relayed-plain", "h2c"],
    ["relayed", "websocket"],
    ["relayed-plain", "websocket"],
  ] as const) {
    test(`h2c smuggling: a relayed Upgrade: ${token} (${host === "relayed" ? "a tunnel with rules" : "no rules"}) answered by a bare 101 is the 502 page, and the request sent with it reaches no service`, async () => {
      const path = `/ws/chat-${host}-${token}`;
      using v = new Raw(visitorPort());
      await v.send(upgradeHead(path, token, host) + smuggled(host));
      await v.whenClosed("the visitor's node to close the connection");
      expect(v.text).toStartWith("HTTP/1.1 502 ");
      expect(v.text).not.toMatch(/^HTTP\/1\.1 101/m);
      const [seen] = ws.headsFor(path);
      // the agent's node took off the switch its tunnel does not allow
      if (token === "h2c") expect(fieldOf(seen!, "upgrade")).toBeUndefined();
      else expect(fieldOf(seen!, "upgrade")).toBe("websocket");
      if (host === "relayed") expect(fieldOf(seen!, "x-added")).toBe("by-rule");
      for (const s of [main, ws]) expect(s.headsFor("/admin/secret")).toEqual([]);
    });
  }

  test("h2c smuggling: a relayed tunnel that names h2c (--allow-upgrade h2c) pipes its 101", async () => {
    using v = new Raw(visitorPort());
    await v.send(upgradeHead("/h2c", "h2c", "relayed-h2c"));
    await v.until((t) => t.includes("\r\n\r\n"), "the 101");
    expect(v.text).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    await v.send("PRI * HTTP/2.0\r\n\r\n");
    await v.until((t) => t.endsWith("PRI * HTTP/2.0\r\n\r\n"), "the echo through the pipe");
  });

  test("identity headers: a relayed request's burrow fields in every spelling are stripped, X-Real-IP and Forwarded are the visitor's node's", async () => {
    for (const host of ["relayed", "relayed-plain"]) {
      using v = new Raw(visitorPort());
      await v.send(
        `GET /who-${host} HTTP/1.1\r\nHost: ${host}.localhost:${visitorPort()}\r\nAuthorization: ${CREDENTIALS}\r\n` +
          "X_Burrow_User: alice\r\nx-burrow-user-email: ceo@corp.example\r\nX-Real-IP: 6.6.6.6\r\nForwarded: for=6.6.6.6\r\n\r\n",
      );
      await v.until((t) => t.includes(`main /who-${host}`), "the answer");
      const [seen] = main.headsFor(`/who-${host}`);
      expect(burrowLines(seen!)).toEqual([]);
      expect(fieldOf(seen!, "x-real-ip")).toBe("127.0.0.1");
      expect(fieldOf(seen!, "forwarded")).toBe(`for=127.0.0.1;proto=http;host="${host}.localhost:${visitorPort()}"`);
    }
  });
});
