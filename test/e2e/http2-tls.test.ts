/**
 * HTTP/2 on the HTTPS public port (certificate files): ALPN offers h2
 * beside http/1.1 to tunnels' names, and http/1.1 alone to the domain
 * itself (the portal, the agents' WebSocket); curl and nghttp get h2
 * through a real tunnel, and Chromium loads a page of a hundred assets
 * over one h2 connection. --h2 off and --h2-prior-knowledge off turn each
 * way off.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { selfSignedCertificate } from "../harness/certs.ts";
import { chromiumPath } from "../harness/chromium.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { startServer } from "../harness/server.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";

setDefaultTimeout(120_000);

const METRICS_TOKEN = "h2-tls-metrics-token-0123456789abc";
const dir = mkdtempSync(join(tmpdir(), "burrow-h2-tls-"));
const certFile = join(dir, "cert.pem");
const keyFile = join(dir, "key.pem");
const responsePolicy = join(dir, "response-policy.yml");
const requestPolicy = join(dir, "request-policy.yml");
const ASSETS = 100;

let t: Rig;
let upstream: ReturnType<typeof Bun.serve>;
let port: number;
let host: string;
const curl = (...args: string[]) => run(["curl", "-sSk", "--resolve", `${host}:127.0.0.1`, "--resolve", `localhost:${port}:127.0.0.1`, ...args]);

/** The page Chromium loads: a hundred small images, each its own request. */
const PAGE = `<!doctype html><title>h2</title>${Array.from({ length: ASSETS }, (_, i) => `<img src="/asset/${i}.svg" width="4" height="4">`).join("")}`;
const SVG = `<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>`;
const protoSeen: string[] = [];

beforeAll(async () => {
  if (!nghttp2Available()) throw new Error("nghttp and h2load are not installed: install Debian's nghttp2-client package (.ci/run installs it)");
  const cert = await selfSignedCertificate({ names: ["localhost", "*.localhost"], ips: ["127.0.0.1"] });
  writeFileSync(certFile, cert.certPem);
  writeFileSync(keyFile, cert.keyPem);
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const path = new URL(req.url).pathname;
      protoSeen.push(req.headers.get("x-forwarded-proto") ?? "");
      if (path === "/page") return new Response(PAGE, { headers: { "content-type": "text/html; charset=utf-8" } });
      if (path.startsWith("/asset/")) return new Response(SVG, { headers: { "content-type": "image/svg+xml", "cache-control": "no-store" } });
      return new Response(`${req.method} ${path} ${await req.text()}`);
    },
  });
  t = await withServer({ server: { args: ["--tls-cert", certFile, "--tls-key", keyFile, "--metrics-token", METRICS_TOKEN] } });
  port = t.server.edgePort;
  // the agent over TLS, trusting the test's own certificate
  await t.startAgent({ kind: "http", target: upstream.port!, server: `https://localhost:${port}`, args: ["--subdomain", "h2tls", "--insecure"] });
  host = `h2tls.localhost:${port}`;
  writeFileSync(responsePolicy, "on_http_response:\n  - actions:\n      - type: add-headers\n        config:\n          headers:\n            x-policy-seen: \"yes\"\n");
  writeFileSync(requestPolicy, "on_http_request:\n  - expressions: [\"req.url.path == '/denied'\"]\n    actions:\n      - type: deny\n        config:\n          status_code: 403\n");
  await t.startAgent({ kind: "http", target: upstream.port!, server: `https://localhost:${port}`, args: ["--subdomain", "h2resp", "--insecure", "--policy-file", responsePolicy] });
  await t.startAgent({ kind: "http", target: upstream.port!, server: `https://localhost:${port}`, args: ["--subdomain", "h2req", "--insecure", "--policy-file", requestPolicy] });
});
afterAll(async () => {
  await t?.close();
  upstream?.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

describe("ALPN", () => {
  test("curl --http2 to a tunnel: h2 chosen by ALPN, the service told https", async () => {
    const r = await curl("--http2", "-w", "\\n%{http_version}", `https://${host}/alpn`);
    expect(r.stdout).toBe("GET /alpn \n2");
    expect(protoSeen.at(-1)).toBe("https");
  });

  test("a tunnel whose traffic policy judges responses: the h2 stream gets the response as the policy made it, over h2", async () => {
    const h = `h2resp.localhost:${port}`;
    const r = await run(["curl", "-sSk", "--resolve", `${h}:127.0.0.1`, "--http2", "-D", "-", "-w", "\n%{http_version}", `https://${h}/judged`]);
    expect(r.stdout).toEndWith("\n2");
    expect(r.stdout.toLowerCase()).toContain("x-policy-seen: yes");
    expect(r.stdout).toContain("GET /judged ");
  });

  test("a tunnel whose traffic policy judges requests only: its rules hold on each h2 stream", async () => {
    const h = `h2req.localhost:${port}`;
    const denied = await run(["curl", "-sSk", "--resolve", `${h}:127.0.0.1`, "--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", `https://${h}/denied`]);
    expect(denied.stdout).toBe("2 403");
    const passed = await run(["curl", "-sSk", "--resolve", `${h}:127.0.0.1`, "--http2", "-w", "\n%{http_version}", `https://${h}/fine`]);
    expect(passed.stdout).toBe("GET /fine \n2");
  });

  test("the domain itself is offered http/1.1 alone: the portal is served over it", async () => {
    const r = await curl("--http2", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", `https://localhost:${port}/`);
    expect(r.stdout).toBe("1.1 200");
  });

  test("a client that offers only http/1.1 gets it", async () => {
    const r = await curl("--http1.1", "-w", "\\n%{http_version}", `https://${host}/h1`);
    expect(r.stdout).toBe("GET /h1 \n1.1");
  });

  test("nghttp over TLS (no server name: h2 offered) with a POST body", async () => {
    const body = join(dir, "body.txt");
    writeFileSync(body, "posted over h2 and TLS");
    const r = await run([NGHTTP, "-d", body, "-H", `:authority: ${host}`, `https://127.0.0.1:${port}/post`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe("POST /post posted over h2 and TLS");
  });
});

describe("Chromium", () => {
  test("a page of a hundred assets over one h2 connection, each reported as h2", async () => {
    const executablePath = chromiumPath();
    if (!executablePath) throw new Error("no Chromium: install Debian's chromium package (.ci/run installs it)");
    const auth = { authorization: `Bearer ${METRICS_TOKEN}` };
    const before = await scrape(t.server.adminUrl, auth);
    const profile = mkdtempSync(join(tmpdir(), "burrow-h2-chromium-"));
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      ignoreHTTPSErrors: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--ignore-certificate-errors"],
    });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      // the browser's own word on which connection carried each response: the
      // server's open-connections gauge also moves when an earlier test's
      // pooled connection closes, so it cannot tell one connection from two
      const cdp = await context.newCDPSession(page);
      const connections = new Set<number>();
      cdp.on("Network.responseReceived", (e: { response: { connectionId: number; url: string } }) => {
        if (e.response.url.startsWith(`https://${host}/`)) connections.add(e.response.connectionId);
      });
      await cdp.send("Network.enable");
      // past the browser warning, whose continue link sets this cookie
      await context.addCookies([{ name: "burrow_skip_warning", value: "1", url: `https://${host}/` }]);
      await page.goto(`https://${host}/page`, { waitUntil: "load" });
      // run in the page (a string: the page's DOM types are not this program's)
      const entries = (await page.evaluate(`[...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")].map((e) => [e.name, e.nextHopProtocol])`)) as [string, string][];
      const loaded = (await page.evaluate(`[...document.images].filter((i) => i.complete && i.naturalWidth > 0).length`)) as number;
      expect(loaded).toBe(ASSETS);
      expect(entries.filter(([name]) => name.includes("/asset/")).length).toBe(ASSETS);
      expect(new Set(entries.map(([, p]) => p))).toEqual(new Set(["h2"]));
      // one connection for the page and its hundred assets
      expect(connections.size).toBe(1);
      const during = await scrape(t.server.adminUrl, auth);
      expect(sample(during, 'burrow_visitor_requests_total{protocol="h2",status="2xx"}') - sample(before, 'burrow_visitor_requests_total{protocol="h2",status="2xx"}')).toBeGreaterThanOrEqual(ASSETS + 1);
    } finally {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    }
  });
});

describe("turned off", () => {
  test("--h2 off: every name gets http/1.1 by ALPN", async () => {
    await using s = await startServer({ args: ["--tls-cert", certFile, "--tls-key", keyFile, "--h2", "off"] });
    const r = await run(["curl", "-sSk", "--http2", "-o", "/dev/null", "-w", "%{http_version}", "--resolve", `any.localhost:${s.edgePort}:127.0.0.1`, `https://any.localhost:${s.edgePort}/`]);
    expect(r.stdout).toBe("1.1");
  });

  test("--h2-prior-knowledge off: the preface is a request refused like any other bad one", async () => {
    await using s = await startServer({ args: ["--h2-prior-knowledge", "off"] });
    const r = await run(["curl", "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version}", `http://127.0.0.1:${s.edgePort}/`]);
    expect(r.stdout).not.toBe("2");
    await using c = await rawH2(s.edgePort);
    await c.untilClosed(10_000);
    expect(c.frames.frames.length).toBe(0); // an HTTP/1.1 answer, no HTTP/2 frame
  });
});
