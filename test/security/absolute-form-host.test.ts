/**
 * Absolute form and Host (the class: a request that names its host twice,
 * `GET http://a/x` with `Host: b`, routed by one name and read by the
 * service behind by the other). RFC 9112 §3.2.2: the target's authority
 * replaces Host. The edge routes by the target's authority and forwards
 * origin form with Host set to it, on a new stream, on a kept one, and
 * through a tunnel's access rules alike (and so hands the portal its
 * requests); the tunnel's --host-header rule applies after, as for any
 * request.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { RawService, response, type RawRequest } from "../agent/raw-service.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";

/** bob's service: answers every request with the request line and Host it got. */
let bobs: RawService;
let rig: Rig;
let port: number;
let bbb: string;

beforeAll(async () => {
  bobs = new RawService((req, socket) => {
    const said = `${req.head.split("\r\n")[0]} host=${hostOf(req)}`;
    socket.write(response(200, [["Content-Length", String(said.length)]], said));
  });
  rig = await withServer({ username: "bob", user: { skip_warning: true } });
  port = rig.server.edgePort;
  bbb = `bbb.localhost:${port}`;
  await rig.startAgent({ kind: "http", target: bobs.port, args: ["--subdomain", "bbb"] });
  await rig.startAgent({ kind: "http", target: bobs.port, args: ["--subdomain", "locked", "--basic-auth", "bob:pw-of-bob"] });
  await rig.startAgent({ kind: "http", target: bobs.port, args: ["--subdomain", "ruled", "--host-header", "inside.test"] });
}, 60_000);

afterAll(async () => {
  await rig?.close();
  bobs?.stop();
});

const hostOf = (req: RawRequest) => req.headers.filter(([n]) => n === "host").map(([, v]) => v).join(",");
const lastSeen = () => bobs.requests.at(-1)!;

describe("absolute form keeps no visitor's Host", () => {
  test("GET http://bbb.localhost:P/abs with Host: evil.example: bob's service gets GET /abs with Host: bbb.localhost:P", async () => {
    const reply = await rawHttp(port, `GET http://${bbb}/abs?q=1 HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(reply.body).toBe(`GET /abs?q=1 HTTP/1.1 host=${bbb}`);
    expect(lastSeen().head).not.toContain("evil.example");
    expect(lastSeen().headers).toContainEqual(["x-forwarded-host", bbb]);
  });

  test("absolute form without a Host field (HTTP/1.1 and 1.0): the service gets the target's as Host", async () => {
    for (const version of ["1.1", "1.0"]) {
      const reply = await rawHttp(port, `GET http://${bbb}/bare HTTP/${version}\r\nConnection: close\r\n\r\n`);
      expect(reply.body).toBe(`GET /bare HTTP/${version} host=${bbb}`);
    }
  });

  test("absolute form on a kept-alive connection, after an origin-form request: each gets its own Host", async () => {
    const reply = await rawHttp(port, `GET /first HTTP/1.1\r\nHost: ${bbb}\r\n\r\nGET http://${bbb}/second HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(reply.body).toContain(`GET /first HTTP/1.1 host=${bbb}`);
    expect(reply.body).toContain(`GET /second HTTP/1.1 host=${bbb}`);
    expect(reply.body).not.toContain("evil.example");
  });

  test("absolute form through a tunnel with access rules (its head written anew): the same Host", async () => {
    const locked = `locked.localhost:${port}`;
    const auth = `Authorization: Basic ${Buffer.from("bob:pw-of-bob").toString("base64")}\r\n`;
    const reply = await rawHttp(port, `GET http://${locked}/in HTTP/1.1\r\nHost: evil.example\r\n${auth}Connection: close\r\n\r\n`);
    expect(reply.body).toBe(`GET /in HTTP/1.1 host=${locked}`);
  });

  test("absolute form naming the server's own domain (the portal): handed on with the target's authority as Host, and served", async () => {
    const portal = `localhost:${port}`;
    expect((await rawHttp(port, `GET / HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`)).status).toBe(404);
    const reply = await rawHttp(port, `GET http://${portal}/ HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(reply.status).toBe(200);
    expect(reply.body).toContain("<html");
  });

  test("the tunnel's --host-header rule applies after: the service gets the rule's Host", async () => {
    const reply = await rawHttp(port, `GET http://ruled.localhost:${port}/r HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n`);
    expect(reply.body).toBe("GET /r HTTP/1.1 host=inside.test");
  });
});
