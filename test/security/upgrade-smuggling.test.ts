/**
 * The h2c-smuggling class (optimistic protocol switches in HTTP/1.1): after
 * a 101 a connection is a pipe no per-request rule reads, so a service that
 * answers a bare 101 to anything let a visitor send raw requests past the
 * routes, the access and header rules, the identity headers and the
 * inspector. Guarded here with the real server, real agents and a naive
 * service (naive-service.ts), on each way in: a public tunnel with basic
 * auth, a path route and header rules, one without rules, a private tunnel
 * reached through `burrow connect`, and kept-alive connections; the relay
 * between nodes is upgrade-smuggling-relay.test.ts's.
 *
 * Also the identity-header class beside it: burrow's own fields in other
 * spellings (X_Burrow_User, x-burrow-user-email), and a visitor's
 * X-Real-IP and Forwarded, which the edge replaces.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { startConnector, type TestConnector } from "../harness/connector.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { burrowLines, fieldOf, startNaiveService, type NaiveService } from "./naive-service.ts";
import { Raw } from "./raw-connection.ts";

/** A test's own bound: several waits of 5 s each (raw-connection.ts). */
setDefaultTimeout(30_000);
const CREDENTIALS = `Basic ${Buffer.from("alice:open-sesame").toString("base64")}`;
/** RFC 6455's sample key. */
const KEY = "dGhlIHNhbXBsZSBub25jZQ==";

let server: TestServer;
let admin: AdminClient;
let main: NaiveService;
let ws: NaiveService;
const agents: TestAgent[] = [];
const connectors: TestConnector[] = [];
let inspector: string;
/** The private tunnel's owner's. */
let ownerInspector: string;
let bobPort: number;

/** The smuggled request of the report: a path outside the route, a forged identity, a header the rules remove, a forged chain. */
const SMUGGLED = "GET /admin/secret HTTP/1.1\r\nHost: smug.localhost\r\nX-Burrow-User-Email: ceo@corp.example\r\nX-Secret-In: smuggled\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n";

beforeAll(async () => {
  main = startNaiveService("main");
  ws = startNaiveService("ws");
  server = await startServer();
  admin = await signedIn(server);
  const alice = await admin.createUser("alice", { skip_warning: true });
  const bob = await admin.createUser("bob");
  const aliceToken = await admin.createToken(alice);
  const bobToken = await admin.createToken(bob);
  const start = (target: number, args: string[]) => startAgent({ kind: "http", target, server: server.edgeUrl, token: aliceToken, args: ["--skip-warning", ...args] });
  agents.push(
    ...(await Promise.all([
      start(main.port, ["--subdomain", "smug", "--route", `/ws=127.0.0.1:${ws.port}`, "--basic-auth", "alice:open-sesame", "--request-header-add", "X-Added: by-rule", "--request-header-remove", "X-Secret-In", "--inspect-addr", "127.0.0.1:0"]),
      start(main.port, ["--subdomain", "plain", "--route", `/ws=127.0.0.1:${ws.port}`, "--no-inspect"]),
      start(ws.port, ["--subdomain", "h2c-ok", "--allow-upgrade", "h2c", "--no-inspect"]),
      startAgent({ kind: "http", target: ws.port, server: server.edgeUrl, token: aliceToken, args: ["--private", "--name", "naive", "--share", "bob", "--inspect-addr", "127.0.0.1:0"] }),
    ])),
  );
  inspector = /Inspector\s+(http:\/\/\S+)/.exec(agents[0]!.output.text())![1]!;
  ownerInspector = /Inspector\s+(http:\/\/\S+)/.exec(agents[3]!.output.text())![1]!;
  const bobConnector = startConnector({ server: server.edgeUrl, token: bobToken, target: "alice/naive" });
  connectors.push(bobConnector);
  bobPort = await bobConnector.port();
}, 60_000);

afterAll(async () => {
  for (const c of connectors) await c[Symbol.asyncDispose]();
  await Promise.all(agents.map((a) => a.stop()));
  await server?.stop();
  main?.stop();
  ws?.stop();
});

const upgradeHead = (path: string, token: string, host = "smug", extra = "") =>
  `GET ${path} HTTP/1.1\r\nHost: ${host}.localhost:${server.edgePort}\r\nAuthorization: ${CREDENTIALS}\r\nConnection: Upgrade\r\nUpgrade: ${token}\r\n` +
  (token === "h2c" ? "HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n" : "") +
  (token === "websocket" ? `Sec-WebSocket-Key: ${KEY}\r\nSec-WebSocket-Version: 13\r\n` : "") +
  `${extra}\r\n`;

/** A plain request on a fresh connection through the tunnel, answered: what the services saw before it has come. */
async function settled(host: string): Promise<void> {
  using v = new Raw(server.edgePort);
  await v.send(`GET /settle HTTP/1.1\r\nHost: ${host}.localhost:${server.edgePort}\r\nAuthorization: ${CREDENTIALS}\r\nConnection: close\r\n\r\n`);
  await v.whenClosed("the settling request's answer");
}

describe("h2c smuggling on a public tunnel (basic auth, --route /ws, header rules)", () => {
  for (const token of ["h2c", "foo", "websocket"]) {
    test(`h2c smuggling: Upgrade: ${token} answered by a bare 101 is the 502 page and a closed connection; the request sent with it reaches no service`, async () => {
      const path = `/ws/chat-${token}`;
      using v = new Raw(server.edgePort);
      // the smuggled request goes with the upgrade, before any answer: it must never be read as the pipe's
      await v.send(upgradeHead(path, token) + SMUGGLED);
      await v.whenClosed("the edge to close the connection");
      expect(v.text).toStartWith("HTTP/1.1 502 ");
      expect(v.text).not.toMatch(/^HTTP\/1\.1 101/m);
      expect(v.text).not.toContain("/admin/secret");
      await settled("smug");
      // the service saw the upgrade request, through the per-request path: the rules applied
      const [seen, ...more] = ws.headsFor(path);
      expect(more).toEqual([]);
      expect(fieldOf(seen!, "x-added")).toBe("by-rule");
      if (token === "websocket") {
        expect(fieldOf(seen!, "upgrade")).toBe("websocket");
      } else {
        // a switch the tunnel does not allow is taken off: a plain request
        expect(fieldOf(seen!, "upgrade")).toBeUndefined();
        expect(fieldOf(seen!, "http2-settings")).toBeUndefined();
        expect(fieldOf(seen!, "connection") ?? "").not.toMatch(/upgrade/i);
      }
      for (const s of [main, ws]) expect(s.headsFor("/admin/secret")).toEqual([]);
      expect([...main.heads, ...ws.heads].filter((h) => /X-Secret-In|ceo@corp/i.test(h))).toEqual([]);
    });

    test(`h2c smuggling: after Upgrade: ${token} and a bare 101 nothing can be sent "inside the pipe"`, async () => {
      const path = `/ws/chat-late-${token}`;
      using v = new Raw(server.edgePort);
      await v.send(upgradeHead(path, token));
      await v.until((t) => t.includes("\r\n\r\n"), "an answer to the upgrade");
      await v.send(SMUGGLED);
      await v.whenClosed("the edge to close the connection");
      expect(v.text).toStartWith("HTTP/1.1 502 ");
      await settled("smug");
      for (const s of [main, ws]) expect(s.headsFor("/admin/secret")).toEqual([]);
    });
  }

  test("h2c smuggling: bytes sent with an upgrade wait for the answer; after a refusal they are the next request, with every per-request rule, seen by the inspector", async () => {
    using v = new Raw(server.edgePort);
    const next = SMUGGLED.replace("/admin/secret", "/admin/next").replace("Host: smug.localhost", `Host: smug.localhost:${server.edgePort}\r\nAuthorization: ${CREDENTIALS}`);
    await v.send(upgradeHead("/ws/refuse", "websocket") + next);
    await v.until((t) => t.includes("not here :(") && t.includes("main /admin/next"), "the refusal, then the next request's answer");
    expect(v.text).toStartWith("HTTP/1.1 426 ");
    // routed by its own path (the tunnel's own service, not the /ws route's), the rules applied
    expect(ws.headsFor("/admin/next")).toEqual([]);
    const [seen] = main.headsFor("/admin/next");
    expect(fieldOf(seen!, "x-added")).toBe("by-rule");
    expect(fieldOf(seen!, "x-secret-in")).toBeUndefined();
    expect(burrowLines(seen!)).toEqual([]);
    expect(fieldOf(seen!, "x-forwarded-for")).toBe("6.6.6.6, 127.0.0.1");
    expect(fieldOf(seen!, "x-real-ip")).toBe("127.0.0.1");
    let listed: { path: string }[] = [];
    await waitUntil(async () => {
      listed = ((await (await fetch(`${inspector}/api/requests`)).json()) as { requests: typeof listed }).requests;
      return listed.some((r) => r.path === "/admin/next");
    }, 5_000, "the inspector's capture of the next request");
    expect(listed.map((r) => r.path)).toContain("/ws/refuse");
  });

  test("h2c smuggling: on a kept-alive connection, an upgrade after plain requests is judged the same way", async () => {
    using v = new Raw(server.edgePort);
    await v.send(`GET /first HTTP/1.1\r\nHost: plain.localhost:${server.edgePort}\r\n\r\n`);
    await v.until((t) => t.includes("main /first"), "the first answer");
    await v.send(upgradeHead("/ws/chat-kept", "h2c", "plain") + SMUGGLED.replace("smug.", "plain."));
    await v.whenClosed("the edge to close the connection");
    expect(v.text.slice(v.text.indexOf("main /first"))).toContain("HTTP/1.1 502 ");
    await settled("plain");
    expect(fieldOf(ws.headsFor("/ws/chat-kept")[0]!, "upgrade")).toBeUndefined();
    for (const s of [main, ws]) expect(s.headsFor("/admin/secret")).toEqual([]);
  });
});

describe("h2c smuggling with --allow-upgrade h2c", () => {
  test("h2c smuggling: the tunnel that names h2c pipes a 101 that names it, bytes both ways", async () => {
    using v = new Raw(server.edgePort);
    await v.send(upgradeHead("/h2c", "h2c", "h2c-ok"));
    await v.until((t) => t.includes("\r\n\r\n"), "the 101");
    expect(v.text).toStartWith("HTTP/1.1 101 Switching Protocols\r\n");
    await v.send("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    await v.until((t) => t.endsWith("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), "the echo through the pipe");
    expect(v.closed).toBe(false);
  });

  test("h2c smuggling: that tunnel still takes off a token it does not name", async () => {
    using v = new Raw(server.edgePort);
    await v.send(upgradeHead("/ws/chat-foo-on-h2c", "foo", "h2c-ok"));
    await v.whenClosed("the edge to close the connection");
    expect(v.text).toStartWith("HTTP/1.1 502 ");
    expect(fieldOf(ws.headsFor("/ws/chat-foo-on-h2c")[0]!, "upgrade")).toBeUndefined();
  });
});

describe("h2c smuggling on a private tunnel (burrow connect)", () => {
  for (const token of ["websocket", "h2c"]) {
    test(`h2c smuggling: bob's Upgrade: ${token} answered by a bare 101 is a 502, and his forged X-Burrow-User after it reaches nothing`, async () => {
      const path = `/ws/chat-private-${token}`;
      using v = new Raw(bobPort);
      await v.send(upgradeHead(path, token, "x") + "GET /private-secret HTTP/1.1\r\nHost: x\r\nX-Burrow-User: alice\r\n\r\n");
      await v.whenClosed("the connection to close");
      expect(v.text).toStartWith("HTTP/1.1 502 ");
      expect(v.text).not.toMatch(/^HTTP\/1\.1 101/m);
      const [seen] = ws.headsFor(path);
      expect(fieldOf(seen!, "x-burrow-user")).toBe("bob");
      if (token === "h2c") expect(fieldOf(seen!, "upgrade")).toBeUndefined();
      // a request of its own on a fresh connection, served after: the smuggled one never came
      expect(await (await fetch(`http://127.0.0.1:${bobPort}/after-${token}`)).text()).toBe(`ws /after-${token}`);
      expect(ws.headsFor("/private-secret")).toEqual([]);
    });
  }

  test("h2c smuggling: bob's bytes sent with an upgrade wait for the answer; after a refusal they are his next request, as bob, whatever he forged", async () => {
    using v = new Raw(bobPort);
    const forged = "GET /private-next HTTP/1.1\r\nHost: x\r\nX-Burrow-User: alice\r\nX_Burrow_User: alice\r\nx-burrow-user-email: ceo@corp.example\r\n\r\n";
    await v.send(upgradeHead("/ws/refuse-private", "websocket", "x") + forged);
    await v.until((t) => t.includes("ws /private-next"), "the refusal, then the next request's answer");
    expect(v.text).toStartWith("HTTP/1.1 426 ");
    const [next] = ws.headsFor("/private-next");
    expect(burrowLines(next!)).toEqual(["X-Burrow-User: bob"]);
    // the owner's inspector saw it as a request of its own, as the service got it
    let listed: { id: string; path: string }[] = [];
    await waitUntil(async () => {
      listed = ((await (await fetch(`${ownerInspector}/api/requests`)).json()) as { requests: typeof listed }).requests;
      return listed.some((r) => r.path === "/private-next");
    }, 5_000, "the owner's inspector's capture of the next request");
    const detail = (await (await fetch(`${ownerInspector}/api/requests/${listed.find((r) => r.path === "/private-next")!.id}`)).json()) as { request: { headers: [string, string][] } };
    expect(detail.request.headers.filter(([n]) => /^x[-_]burrow[-_]/i.test(n))).toEqual([["X-Burrow-User", "bob"]]);
  });
});

describe("identity headers in other spellings, X-Real-IP and Forwarded", () => {
  const forged =
    "X_Burrow_User: alice\r\nx-burrow-user-email: ceo@corp.example\r\nX-BURROW-USER: root\r\nx_burrow_user_email: ceo@corp.example\r\n" +
    "X-Burrow-Anything-At-All-Of-Any-Length: 1\r\nX-Real-IP: 6.6.6.6\r\nForwarded: for=6.6.6.6;proto=https\r\nX-Forwarded-For: 6.6.6.6\r\n";

  for (const host of ["plain", "smug"]) {
    test(`identity headers: every spelling of burrow's own fields is stripped, X-Real-IP and Forwarded are the edge's (${host === "smug" ? "a tunnel with rules" : "a tunnel without rules"}, kept-alive requests)`, async () => {
      using v = new Raw(server.edgePort);
      for (const n of [1, 2]) {
        await v.send(`GET /who-${host}-${n} HTTP/1.1\r\nHost: ${host}.localhost:${server.edgePort}\r\nAuthorization: ${CREDENTIALS}\r\n${forged}\r\n`);
        await v.until((t) => t.includes(`main /who-${host}-${n}`), `answer ${n}`);
      }
      for (const n of [1, 2]) {
        const [seen] = main.headsFor(`/who-${host}-${n}`);
        expect(burrowLines(seen!)).toEqual([]);
        expect(seen!.match(/^x-real-ip:/gim)).toHaveLength(1);
        expect(fieldOf(seen!, "x-real-ip")).toBe("127.0.0.1");
        expect(seen!.match(/^forwarded:/gim)).toHaveLength(1);
        expect(fieldOf(seen!, "forwarded")).toBe(`for=127.0.0.1;proto=http;host="${host}.localhost:${server.edgePort}"`);
        expect(fieldOf(seen!, "x-forwarded-for")).toBe("6.6.6.6, 127.0.0.1");
      }
    });
  }
});
