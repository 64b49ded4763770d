/**
 * Malformed requests are the sender's mistake: the edge and the admin port
 * answer them with 400, never 500, log them at info level a few times a
 * minute at most, and go on serving everyone else.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { rawExchange } from "../harness/fuzz.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

const BAD_HOSTS = [
  "a.localhost@b.localhost",
  "x y",
  "[::1",
  "%00",
  "",
  "localhost:99999999",
  "localhost:-1",
  "a/b.localhost",
  "a?b",
  "a#b",
  "a\\b",
  ":80",
  "a..localhost",
  "-",
  "ü.localhost",
  "x".repeat(300),
];

let tunnel: Tunnel;
let adminPort: number;
/** What the local service was asked: method, path and Content-Length of each request. */
const seen: string[] = [];
const upstream = (req: Request) => {
  seen.push(`${req.method} ${new URL(req.url).pathname} ${req.headers.get("content-length") ?? "-"}`);
  return new Response("still here");
};

beforeAll(async () => {
  tunnel = await withTunnel({ username: "steady", upstream, args: ["--subdomain", "steady"] });
  adminPort = Number(new URL(tunnel.server.adminUrl).port);
});
afterAll(() => tunnel?.close());

const request = (host: string, target = "/") => `GET ${target} HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`;

test.each(BAD_HOSTS.map((h) => [JSON.stringify(h).slice(0, 40), h]))("Host %s gets 400 from the edge and from the admin port", async (_, host) => {
  const edge = await rawHttp(tunnel.server.edgePort, request(host));
  expect(edge.status).toBe(400);
  expect(edge.body).toContain("Host header");
  const admin = await rawHttp(adminPort, request(host, "/api/users"));
  expect(admin.status).toBe(400);
  expect(JSON.parse(admin.body)).toEqual({ error: "the Host header does not name a valid host" });
});

test("valid but unusual hosts are not refused: a trailing dot, upper case, an IPv6 literal, an explicit port", async () => {
  for (const [host, status] of [
    [`STEADY.LOCALHOST:${tunnel.server.edgePort}`, 200],
    [`steady.localhost.:${tunnel.server.edgePort}`, 200],
    ["[::1]:80", 404],
    // the domain itself: the portal's page
    [`localhost:${tunnel.server.edgePort}`, 200],
  ] as const) {
    const reply = await rawHttp(tunnel.server.edgePort, request(host));
    expect(`${host} ${reply.status}`).toBe(`${host} ${status}`);
  }
});

test("a flood of bad requests is logged at info level, a few lines a minute, with no error lines", async () => {
  const before = tunnel.server.output.text().split("\n").filter((l) => l.includes("bad request refused")).length;
  for (let i = 0; i < 60; i++) expect((await rawHttp(tunnel.server.edgePort, request("%00"))).status).toBe(400);
  const lines = tunnel.server.output.text().split("\n");
  const refused = lines.filter((l) => l.includes("bad request refused"));
  expect(refused.length - before).toBeLessThanOrEqual(20);
  expect(refused.every((l) => / info /.test(l))).toBe(true);
  expect(lines.filter((l) => / error /.test(l))).toEqual([]);
});

test.each(["GET", "HEAD", "TRACE"])(
  "a %s with a body (Content-Length: 3) has it passed on as sent, and the agent's kept-alive connection to the local service stays in step",
  async (method) => {
    seen.length = 0;
    const host = `steady.localhost:${tunnel.server.edgePort}`;
    // the visitor's connection stays open (keep-alive): the exchange ends at the response head
    const first = await rawExchange(tunnel.server.edgePort, `${method} /first HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 3\r\n\r\n\0\0\0`, 5_000);
    expect(first.status).toBe(200);
    // the next visitor's request goes over the same pooled connection to the local service
    const next = await rawHttp(tunnel.server.edgePort, `GET /after HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expect(next.status).toBe(200);
    expect(next.body).toContain("still here");
    expect(seen).toEqual([`${method} /first 3`, "GET /after -"]);
  },
);

test("a bodyless POST keeps its Content-Length: 0 on the way to the local service", async () => {
  seen.length = 0;
  const reply = await rawHttp(tunnel.server.edgePort, `POST /empty HTTP/1.1\r\nHost: steady.localhost:${tunnel.server.edgePort}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n`);
  expect(reply.status).toBe(200);
  expect(seen).toEqual(["POST /empty 0"]);
});

test("the tunnel and the admin API answer normally after all of it", async () => {
  const res = await tunnel.fetch("/");
  expect(await res.text()).toBe("still here");
  const api = await signedIn(tunnel.server);
  expect((await api.get("/api/users")).status).toBe(200);
});
