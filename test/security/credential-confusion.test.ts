/**
 * Credential and routing confusion (the class of frp CVE-2026-40910: the
 * code that routes a request and the code that judges it read different
 * parts of it, so a request routed to one tunnel is judged by another's
 * rules, or credentials are looked for in a field the rule never meant).
 * Basic auth reads `Authorization` and only it: `Proxy-Authorization` is
 * no credential for a tunnel, and credentials in one field are judged in
 * that field. A request names its tunnel once: an absolute-form target's
 * authority wins over Host (RFC 9112 §3.2.2), for the route, the rules
 * and the Host the service reads alike, on every request of a kept-alive
 * connection.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RawService, response } from "../agent/raw-service.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";

/** Each tunnel's service answers with its own name, the request line and the Host it got. */
function named(name: string): RawService {
  return new RawService((req, socket) => {
    const host = req.headers.find(([n]) => n === "host")?.[1];
    const said = `${name}: ${req.head.split("\r\n")[0]} host=${host}`;
    socket.write(response(200, [["Content-Length", String(said.length)]], said));
  });
}

const services = { aaa: named("aaa"), bbb: named("bbb"), open: named("open") };
let rig: Rig;
let port: number;
const at = (name: string) => `${name}.localhost:${port}`;
const basic = (pair: string) => `Basic ${Buffer.from(pair).toString("base64")}`;
const ALICE = basic("alice:pw-of-alice");
const BOB = basic("bob:pw-of-bob");

beforeAll(async () => {
  rig = await withServer({ username: "owner", user: { skip_warning: true } });
  port = rig.server.edgePort;
  await rig.startAgent({ kind: "http", target: services.aaa.port, args: ["--subdomain", "aaa", "--basic-auth", "alice:pw-of-alice"] });
  await rig.startAgent({ kind: "http", target: services.bbb.port, args: ["--subdomain", "bbb", "--basic-auth", "bob:pw-of-bob"] });
  await rig.startAgent({ kind: "http", target: services.open.port, args: ["--subdomain", "open"] });
}, 60_000);

afterAll(async () => {
  await rig?.close();
  for (const s of Object.values(services)) s.stop();
});

/** One request, its fields as given, on a connection of its own. */
function send(target: string, fields: [string, string][]) {
  const head = `GET ${target} HTTP/1.1\r\n${fields.map(([n, v]) => `${n}: ${v}\r\n`).join("")}Connection: close\r\n\r\n`;
  return rawHttp(port, head);
}
/** How many requests each tunnel's service has been sent so far. */
const seen = (): Record<keyof typeof services, number> => ({ aaa: services.aaa.requests.length, bbb: services.bbb.requests.length, open: services.open.requests.length });

describe("credential confusion: Authorization only, judged where it was sent", () => {
  test("Proxy-Authorization alone, with the right credentials, is no credential: 401", async () => {
    const before = seen();
    const reply = await send("/p", [["Host", at("aaa")], ["Proxy-Authorization", ALICE]]);
    expect(reply.status).toBe(401);
    expect(seen()).toEqual(before);
  });

  test("right in Proxy-Authorization, wrong in Authorization: judged by Authorization, 401", async () => {
    const reply = await send("/p", [["Host", at("aaa")], ["Proxy-Authorization", ALICE], ["Authorization", basic("alice:wrong")]]);
    expect(reply.status).toBe(401);
  });

  test("right in Authorization, wrong in Proxy-Authorization: judged by Authorization, let through", async () => {
    const reply = await send("/p", [["Host", at("aaa")], ["Authorization", ALICE], ["Proxy-Authorization", basic("alice:wrong")]]);
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(`aaa: GET /p HTTP/1.1 host=${at("aaa")}`);
  });

  test("another tunnel's credentials are no credential here", async () => {
    expect((await send("/p", [["Host", at("aaa")], ["Authorization", BOB]])).status).toBe(401);
  });
});

describe("routing confusion: an absolute-form target names the tunnel, whatever Host says", () => {
  test("a target naming A with Host: B and no credentials: A's rules answer 401, B's service never sees it", async () => {
    const before = seen();
    const reply = await send(`http://${at("aaa")}/x`, [["Host", at("bbb")]]);
    expect(reply.status).toBe(401);
    expect(seen()).toEqual(before);
  });

  test("a target naming A with Host: B and B's credentials: still A's rules, 401", async () => {
    const before = seen();
    const reply = await send(`http://${at("aaa")}/x`, [["Host", at("bbb")], ["Authorization", BOB]]);
    expect(reply.status).toBe(401);
    expect(seen()).toEqual(before);
  });

  test("a target naming A with Host: B and A's credentials: A's service answers, with A's name as Host", async () => {
    const before = seen();
    const reply = await send(`http://${at("aaa")}/x`, [["Host", at("bbb")], ["Authorization", ALICE]]);
    expect(reply.body).toBe(`aaa: GET /x HTTP/1.1 host=${at("aaa")}`);
    expect(seen().bbb).toBe(before.bbb);
  });

  test("a target naming an open tunnel with Host: A: the open tunnel's service answers, A's never sees it", async () => {
    const before = seen();
    const reply = await send(`http://${at("open")}/y`, [["Host", at("aaa")]]);
    expect(reply.body).toBe(`open: GET /y HTTP/1.1 host=${at("open")}`);
    expect(seen().aaa).toBe(before.aaa);
  });

  test("on one kept-alive connection: B with B's credentials, then a target naming A with Host: B and B's credentials: 401 for the second", async () => {
    const before = seen();
    const second = `GET http://${at("aaa")}/z HTTP/1.1\r\nHost: ${at("bbb")}\r\nAuthorization: ${BOB}\r\nConnection: close\r\n\r\n`;
    const reply = await rawHttp(port, `GET /first HTTP/1.1\r\nHost: ${at("bbb")}\r\nAuthorization: ${BOB}\r\n\r\n${second}`);
    expect(reply.head).toStartWith("HTTP/1.1 200");
    expect(reply.body).toContain(`bbb: GET /first HTTP/1.1 host=${at("bbb")}`);
    expect(reply.body).toContain("HTTP/1.1 401");
    expect(seen()).toEqual({ ...before, bbb: before.bbb + 1 });
  });

  test("on one kept-alive connection: an open tunnel, then a target naming A without credentials: 401, A's service never sees it", async () => {
    const before = seen();
    const reply = await rawHttp(port, `GET /first HTTP/1.1\r\nHost: ${at("open")}\r\n\r\nGET http://${at("aaa")}/z HTTP/1.1\r\nHost: ${at("open")}\r\nConnection: close\r\n\r\n`);
    expect(reply.body).toContain(`open: GET /first HTTP/1.1 host=${at("open")}`);
    expect(reply.body).toContain("HTTP/1.1 401");
    expect(seen()).toEqual({ ...before, open: before.open + 1 });
  });
});
