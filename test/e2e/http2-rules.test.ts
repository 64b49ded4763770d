/**
 * Every rule of the judgement holds per HTTP/2 stream, as per HTTP/1.1
 * request: on ONE h2 connection, streams to several tunnels (a browser
 * coalesces names that share a certificate and an address) are each named,
 * admitted and judged on their own: basic auth, IP rules on each stream's
 * client (a trusted proxy's X-Forwarded-For), the agent's path routes, the
 * browser warning and its continue link; an unknown name is the 404 page,
 * and the portal's domain (served over HTTP/1.1 only) is 421. A stream
 * refused never reaches the service, and does not end the connection.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2, type RawH2 } from "../harness/h2-raw.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";

setDefaultTimeout(60_000);

const BROWSER: [string, string][] = [
  ["user-agent", "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36"],
  ["accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"],
];
const CURL: [string, string][] = [["user-agent", "curl/8"]];

/** What each service saw: "service path". */
const reached: string[] = [];
const serve = (name: string) =>
  Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      reached.push(`${name} ${path}`);
      return new Response(`${name} ${path}`, { headers: { "x-team-seen": req.headers.get("x-team") ?? "none" } });
    },
  });
const site = serve("site");
const api = serve("api");

let rig: Rig;
let port: number;
let c: RawH2;
let nextStream = 1;

/** Sends a GET on the shared connection and waits for its whole answer: status and body. */
async function get(name: string, path: string, extra: [string, string][] = CURL): Promise<{ status: string; body: string; fields: [string, string][] }> {
  const id = nextStream;
  nextStream += 2;
  const authority = name === "" ? `localhost:${port}` : `${name}.localhost:${port}`;
  c.send(headers(id, [[":method", "GET"], [":scheme", "http"], [":authority", authority], [":path", path], ...extra]));
  await c.until(() => c.frames.heads.some((h) => h.stream === id && h.endStream) || c.frames.frames.some((f) => f.stream === id && f.flags & 1 && f.type === 0), 10_000, `the answer to ${authority}${path}`);
  const head = c.frames.heads.find((h) => h.stream === id)!;
  return { status: c.frames.status(id)!, body: c.frames.body(id), fields: head.fields };
}

beforeAll(async () => {
  rig = await withServer({ server: { args: ["--trusted-proxies", "127.0.0.1"] } });
  port = rig.server.edgePort;
  await rig.startAgent({
    kind: "http",
    target: site.port!,
    args: ["--subdomain", "guarded", "--basic-auth", "carol:s3cret", "--request-header-add", "X-Team: blue", "--response-header-add", "Cache-Control: no-store"],
  });
  await rig.startAgent({ kind: "http", target: site.port!, args: ["--subdomain", "walled", "--allow-cidr", "10.0.0.0/8"] });
  await rig.startAgent({ kind: "http", target: site.port!, args: ["--subdomain", "routed", "--route", `/api=${api.port}`] });
  c = await rawH2(port);
  c.send(settingsAck());
});
afterAll(async () => {
  c?.close();
  await rig?.close();
  site.stop(true);
  api.stop(true);
});

const basic = (user: string, pw: string): [string, string] => ["authorization", `Basic ${btoa(`${user}:${pw}`)}`];

describe("on one HTTP/2 connection, each stream judged on its own", () => {
  test("basic auth: 401 without or with a wrong password, the service's answer with the right one", async () => {
    const before = reached.length;
    const none = await get("guarded", "/secret");
    expect(none.status).toBe("401");
    expect(none.fields.find(([n]) => n === "www-authenticate")?.[1]).toContain("Basic");
    expect((await get("guarded", "/secret", [...CURL, basic("carol", "wrong")])).status).toBe("401");
    expect(reached.length).toBe(before);
    const right = await get("guarded", "/secret", [...CURL, basic("carol", "s3cret")]);
    expect(right).toMatchObject({ status: "200", body: "site /secret" });
    // the tunnel's header rules, both ways, the response's fields lower-cased as HTTP/2 has them
    expect(right.fields).toContainEqual(["x-team-seen", "blue"]);
    expect(right.fields).toContainEqual(["cache-control", "no-store"]);
    // the next stream brings no credentials: refused again, whatever the one before had
    expect((await get("guarded", "/secret")).status).toBe("401");
  });

  test("IP rules on each stream's client: a trusted proxy's X-Forwarded-For, stream by stream", async () => {
    const inside = await get("walled", "/in", [...CURL, ["x-forwarded-for", "10.1.2.3"]]);
    expect(inside).toMatchObject({ status: "200", body: "site /in" });
    const outside = await get("walled", "/out", [...CURL, ["x-forwarded-for", "192.0.2.50"]]);
    expect(outside.status).toBe("403");
    expect(reached).not.toContain("site /out");
    // and the proxy itself, naming nobody
    expect((await get("walled", "/proxy")).status).toBe("403");
  });

  test("the agent's path routes: streams to one name reach the service their path says", async () => {
    expect((await get("routed", "/api/users")).body).toBe("api /api/users");
    expect((await get("routed", "/home")).body).toBe("site /home");
  });

  test("the browser warning: due to a browser's stream, not to one with its cookie, nor to a non-browser", async () => {
    const warned = await get("routed", "/page", BROWSER);
    expect(warned.status).toBe("200");
    expect(warned.body).toContain("This site is served through a tunnel");
    expect(reached).not.toContain("site /page");
    const cont = await get("routed", "/_burrow/continue?to=%2Fpage", BROWSER);
    expect(cont.status).toBe("302");
    expect(cont.fields.find(([n]) => n === "set-cookie")?.[1]).toStartWith("burrow_skip_warning=1");
    expect((await get("routed", "/page", [...BROWSER, ["cookie", "burrow_skip_warning=1"]])).body).toBe("site /page");
  });

  test("an unknown name is the 404 page; the portal's domain, HTTP/1.1's alone, is 421", async () => {
    expect((await get("nobody", "/")).status).toBe("404");
    const portal = await get("", "/");
    expect(portal.status).toBe("421");
  });

  test("none of the refusals ended the connection", () => {
    expect(c.isClosed).toBe(false);
    expect(c.frames.goawayCode).toBeUndefined();
  });
});
