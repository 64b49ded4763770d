/**
 * The browser warning interstitial: a browser's first visit to a tunnel
 * sees whose tunnel it is and a continue link; the link sets a day-long
 * cookie and returns to the page, which is then forwarded. Non-browsers,
 * WebSockets, preflights, the skip header, and tunnels allowed to skip it
 * never see it; the continue link never leaves the tunnel's host.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { ServerWebSocket } from "bun";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const WAIT_MS = 10_000;
const BROWSER = {
  "user-agent": "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
  accept: "text/html,application/xhtml+xml,application/xml;q=0.9,image/avif,*/*;q=0.8",
};

// -- the local service: counts what reaches it ------------------------------------------------------------

const reached: { path: string; headers: Headers }[] = [];
const upstream = Bun.serve<undefined>({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req, srv) {
    const url = new URL(req.url);
    reached.push({ path: url.pathname + url.search, headers: req.headers });
    if (req.headers.get("upgrade")?.toLowerCase() === "websocket") {
      return srv.upgrade(req, { data: undefined }) ? undefined : new Response("upgrade failed", { status: 400 });
    }
    if (req.method === "OPTIONS") {
      return new Response(null, { status: 204, headers: { "access-control-allow-origin": "*", "access-control-allow-methods": "GET, POST" } });
    }
    return new Response(`the site itself: ${url.pathname}${url.search}`, { headers: { "content-type": "text/html" } });
  },
  websocket: {
    message(ws: ServerWebSocket<undefined>, m: string | Buffer) {
      ws.send(m);
    },
  },
});
const reachedPath = (path: string) => reached.filter((r) => r.path === path).length;

// -- two users: wendy may not skip the warning, sam may -------------------------------------------------------

let server: TestServer;
const agents: TestAgent[] = [];

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  const wendy = await api.createUser("wendy");
  const sam = await api.createUser("sam");
  const put = await api.put(`/api/users/${sam}`, { skip_warning: true });
  expect(put.status).toBe(200);
  const tokenOf = (id: number) => api.createToken(id);
  const [wendyToken, samToken] = await Promise.all([tokenOf(wendy), tokenOf(sam)]);
  const start = (token: string, args: string[]) =>
    startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server.edgeUrl, token, args });
  agents.push(
    ...(await Promise.all([
      start(wendyToken, ["--subdomain", "warned"]),
      start(wendyToken, ["--subdomain", "warned-flag", "--skip-warning"]),
      start(samToken, ["--subdomain", "skipped", "--skip-warning"]),
      start(samToken, ["--subdomain", "sam-noflag"]),
    ])),
  );
});

afterAll(async () => {
  await Promise.allSettled(agents.map((a) => a.stop()));
  await server?.stop();
  upstream.stop(true);
});

const browse = (sub: string, path: string, headers: Record<string, string> = {}, method = "GET") =>
  tunnelFetch(server.edgePort, sub, path, { method, headers: { ...BROWSER, ...headers } });

/** The warning page's continue link, unescaped. */
function continueLink(html: string): string {
  const m = /<a [^>]*href="([^"]+)"[^>]*>\s*Continue/i.exec(html);
  if (!m) throw new Error(`no continue link in:\n${html}`);
  return m[1]!.replace(/&amp;/g, "&").replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">");
}

function expectWarning(res: Response, html: string, owner: string) {
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toStartWith("text/html");
  expect(html).toContain("served through a tunnel");
  expect(html).toContain(`<strong>${owner}</strong>`);
  expect(html).not.toContain("the site itself");
  expect(html).not.toMatch(/(?:src|href|action)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?\/\//i);
  expect(html.length).toBeLessThan(8 * 1024);
}

// -- the tests ------------------------------------------------------------------------------------------------

describe("a browser's first visit", () => {
  test("gets a warning page naming the tunnel's owner, and the request does not reach the local service", async () => {
    const res = await browse("warned", "/docs/page?a=1&b=two");
    const html = await res.text();
    expectWarning(res, html, "wendy");
    expect(html).toContain(`warned.localhost:${server.edgePort}`);
    expect(continueLink(html)).toBe(`/_burrow/continue?to=${encodeURIComponent("/docs/page?a=1&b=two")}`);
    expect(reachedPath("/docs/page?a=1&b=two")).toBe(0);
  });

  test("continues through the link: a day-long cookie, back to the page, which is then forwarded", async () => {
    const warning = await browse("warned", "/article?id=7");
    const link = continueLink(await warning.text());
    const cont = await browse("warned", link);
    expect(cont.status).toBe(302);
    expect(cont.headers.get("location")).toBe("/article?id=7");
    const setCookie = cont.headers.get("set-cookie") ?? "";
    expect(setCookie).toMatch(/(^|;\s*)Max-Age=86400(;|$)/i);
    expect(setCookie).toMatch(/(^|;\s*)Path=\/(;|$)/i);
    expect(setCookie).not.toMatch(/domain=/i);
    const cookie = setCookie.split(";")[0]!;
    expect(reachedPath("/article?id=7")).toBe(0);

    const res = await browse("warned", "/article?id=7", { cookie });
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("the site itself: /article?id=7");
    expect(reachedPath("/article?id=7")).toBe(1);
    // among other cookies, too
    const again = await browse("warned", "/article?id=7", { cookie: `theme=dark; ${cookie}; lang=en` });
    expect(await again.text()).toBe("the site itself: /article?id=7");
  });

  test("of the same browser to another page after continuing is forwarded too", async () => {
    const cont = await browse("warned", "/_burrow/continue?to=%2F");
    const cookie = (cont.headers.get("set-cookie") ?? "").split(";")[0]!;
    const res = await browse("warned", "/elsewhere", { cookie });
    expect(await res.text()).toBe("the site itself: /elsewhere");
  });
});

describe("no warning", () => {
  test("for a request with X-Burrow-Skip-Warning, whatever its value", async () => {
    for (const value of ["1", "true", "no", "anything at all"]) {
      const path = `/skip-header?value=${encodeURIComponent(value)}`;
      const res = await browse("warned", path, { "x-burrow-skip-warning": value });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe(`the site itself: ${path}`);
      // the header is the edge's business, not the local service's
      expect(reached.at(-1)!.headers.has("x-burrow-skip-warning")).toBe(false);
    }
  });

  test("for clients that are not browsers", async () => {
    const clients: Record<string, string>[] = [
      { "user-agent": "curl/8.5.0", accept: "text/html" },
      { "user-agent": "python-requests/2.31", accept: "*/*" },
      { "user-agent": BROWSER["user-agent"], accept: "*/*" },
      { "user-agent": BROWSER["user-agent"], accept: "application/json" },
      { accept: BROWSER.accept },
    ];
    for (const [i, headers] of clients.entries()) {
      const res = await tunnelFetch(server.edgePort, "warned", `/api/${i}`, { headers });
      expect(await res.text()).toBe(`the site itself: /api/${i}`);
    }
  });

  test("for a WebSocket upgrade from a browser", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}/live`, {
      headers: { host: `warned.localhost:${server.edgePort}`, ...BROWSER },
    } as any);
    try {
      const echoed = new Promise<string>((resolve, reject) => {
        ws.onopen = () => ws.send("through the warning");
        ws.onmessage = (ev) => resolve(String(ev.data));
        ws.onerror = () => reject(new Error("the WebSocket failed"));
      });
      expect(await within(echoed, WAIT_MS, "the echo through the WebSocket")).toBe("through the warning");
    } finally {
      ws.close();
    }
  });

  test("for a CORS preflight (OPTIONS) from a browser", async () => {
    const res = await browse("warned", "/api/items", { origin: "http://app.example", "access-control-request-method": "POST" }, "OPTIONS");
    expect(res.status).toBe(204);
    expect(res.headers.get("access-control-allow-origin")).toBe("*");
    expect(reached.at(-1)!.path).toBe("/api/items");
  });

  test("for a tunnel opened with --skip-warning by a user allowed to skip it", async () => {
    const res = await browse("skipped", "/home");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("the site itself: /home");
  });
});

describe("the warning still shows", () => {
  test("for --skip-warning when the user is not allowed to skip it", async () => {
    const res = await browse("warned-flag", "/home");
    expectWarning(res, await res.text(), "wendy");
  });

  test("for a user allowed to skip it who did not ask to", async () => {
    const res = await browse("sam-noflag", "/home");
    expectWarning(res, await res.text(), "sam");
  });

  test("for another tunnel than the one whose warning was passed", async () => {
    const cont = await browse("warned", "/_burrow/continue?to=%2F");
    const cookie = (cont.headers.get("set-cookie") ?? "").split(";")[0]!;
    // the cookie has no Domain: a browser would not send it to another tunnel's host at all
    expect(cont.headers.get("set-cookie")).not.toMatch(/domain=/i);
    const res = await browse("sam-noflag", "/home");
    expectWarning(res, await res.text(), "sam");
    expect(cookie).toContain("=");
  });
});

test("the continue link never redirects off the tunnel's host", async () => {
  const origin = `http://warned.localhost:${server.edgePort}`;
  const hostile = [
    "//evil.example",
    "//evil.example/path",
    "https://evil.example/",
    "http:evil.example",
    "javascript:alert(1)",
    "/\\evil.example",
    "\\\\evil.example",
    "/\t/evil.example",
    "/\n/evil.example",
    "\t//evil.example",
    " //evil.example",
    "evil.example",
    "",
  ];
  for (const to of hostile) {
    const res = await browse("warned", `/_burrow/continue?to=${encodeURIComponent(to)}`);
    expect(res.status, `to=${JSON.stringify(to)}`).toBe(302);
    const location = res.headers.get("location")!;
    // resolved the way a browser resolves it, it stays on the tunnel's own origin
    expect(new URL(location, origin + "/").origin, `to=${JSON.stringify(to)} -> ${JSON.stringify(location)}`).toBe(origin);
  }
  for (const to of ["//evil.example", "https://evil.example/", "/\\evil.example"]) {
    const res = await browse("warned", `/_burrow/continue?to=${encodeURIComponent(to)}`);
    expect(res.headers.get("location")).toBe("/");
  }
  const none = await browse("warned", "/_burrow/continue");
  expect(none.headers.get("location")).toBe("/");
});
