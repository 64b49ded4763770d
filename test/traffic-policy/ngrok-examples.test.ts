/**
 * Policies from ngrok's documentation (fixtures/ngrok-*.yml, each naming
 * its page on its first line), run unchanged: `burrow policy check`
 * accepts each, and a real tunnel started with `burrow http --policy-file`
 * on it does, against curl, what the page says it does.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { runBurrow } from "../harness/run.ts";
import { curl } from "./curl.ts";
import { echo, type Echoed } from "./rig.ts";
import { withTunnel } from "../harness/tunnel.ts";

setDefaultTimeout(60_000);

const fixtures = join(import.meta.dir, "fixtures");
const fixture = (name: string) => join(fixtures, name);

/** A tunnel whose agent runs with the fixture, unchanged, as its --policy-file. */
async function tunnelWith(name: string, upstream: (req: Request) => Response | Promise<Response> = echo) {
  const t = await withTunnel({ upstream, args: ["--policy-file", fixture(name)] });
  const url = (path: string) => `http://${t.agent.subdomain}.localhost:${t.server.edgePort}${path}`;
  return Object.assign(t, { curl: (path: string, args: string[] = []) => curl(url(path), args) });
}

describe("ngrok's example policies, unchanged", () => {
  const files = readdirSync(fixtures).filter((f) => /^ngrok-.*\.yml$/.test(f));

  test("there are examples, and each names the page it comes from", () => {
    expect(files.length).toBeGreaterThanOrEqual(8);
    for (const f of files) expect(readFileSync(fixture(f), "utf8")).toMatch(/^# From ngrok's documentation, .*\(https:\/\/ngrok\.com\/docs\//);
  });

  for (const f of files) {
    test(`burrow policy check ${f}: exit 0`, async () => {
      const out = await runBurrow(["policy", "check", fixture(f)]);
      expect(out.stderr).toBe("");
      expect(out.code).toBe(0);
      expect(out.stdout).toContain(": ok,");
    });
  }

  test("robots.txt: /robots.txt is answered at the edge with the file as text/plain; other paths reach the service", async () => {
    await using t = await tunnelWith("ngrok-robots-txt.yml");
    const robots = await t.curl("/robots.txt");
    expect(robots.status).toBe(200);
    expect(robots.headers["content-type"]).toBe("text/plain");
    expect(robots.body).toBe("User-agent: *\r\nDisallow: /");
    expect(robots.headers["x-from-service"]).toBeUndefined();
    const page = await t.curl("/index.html");
    expect(page.headers["x-from-service"]).toBe("yes");
  });

  test("deny non-GET requests: POST and DELETE get 403, GET reaches the service", async () => {
    await using t = await tunnelWith("ngrok-deny-non-get.yml");
    expect((await t.curl("/x", ["-X", "POST", "-d", "a=1"])).status).toBe(403);
    expect((await t.curl("/x", ["-X", "DELETE"])).status).toBe(403);
    const get = await t.curl("/x");
    expect(get.status).toBe(200);
    expect((JSON.parse(get.body) as Echoed).method).toBe("GET");
  });

  test("custom response for unauthorized requests: no Authorization, 401 Unauthorized; with one, the service", async () => {
    await using t = await tunnelWith("ngrok-unauthorized-custom-response.yml");
    const bare = await t.curl("/");
    expect(bare.status).toBe(401);
    expect(bare.body).toBe("Unauthorized");
    const authed = await t.curl("/", ["-H", "Authorization: Bearer x"]);
    expect(authed.status).toBe(200);
    expect(authed.headers["x-from-service"]).toBe("yes");
  });

  test("limit request sizes: a POST or PUT of 1000 bytes or more gets 400 with the page's message; a small one goes through", async () => {
    await using t = await tunnelWith("ngrok-limit-request-sizes.yml");
    const big = await t.curl("/upload", ["-X", "PUT", "--data-binary", "x".repeat(1000)]);
    expect(big.status).toBe(400);
    expect(big.body).toBe("Error: You can't upload content larger than 1MB.");
    const small = await t.curl("/upload", ["--data-binary", "x".repeat(999)]);
    expect(small.status).toBe(200);
    expect((JSON.parse(small.body) as Echoed).body).toBe("x".repeat(999));
  });

  test("rate limit by endpoint: 30 a minute to /api/specific_endpoint per client, then 429; other paths are not limited", async () => {
    await using t = await tunnelWith("ngrok-rate-limit-by-endpoint.yml");
    const statuses: number[] = [];
    for (let i = 0; i < 31; i++) statuses.push((await t.curl("/api/specific_endpoint")).status);
    expect(statuses.slice(0, 30).every((s) => s === 200)).toBe(true);
    expect(statuses[30]).toBe(429);
    expect((await t.curl("/api/other")).status).toBe(200);
  });

  test("url rewrite: /blog/11/example/ reaches the service as /blog/index.php?p=11&title=example, the visitor's URL unchanged", async () => {
    await using t = await tunnelWith("ngrok-url-rewrite-blog.yml");
    const r = await t.curl("/blog/11/example/");
    expect(r.statuses).toEqual([200]);
    expect((JSON.parse(r.body) as Echoed).path).toBe("/blog/index.php?p=11&title=example");
    expect((JSON.parse((await t.curl("/about")).body) as Echoed).path).toBe("/about");
  });

  test("compress JSON responses: curl --compressed gets the JSON gzip- or br-encoded and reads it back", async () => {
    const json = JSON.stringify({ items: Array.from({ length: 200 }, (_, i) => ({ id: i, name: `item ${i}` })) });
    await using t = await tunnelWith("ngrok-compress-json-responses.yml", () => Response.json(JSON.parse(json)));
    const gz = await t.curl("/items", ["--compressed", "-H", "Accept-Encoding: gzip"]);
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.body).toBe(json);
    const br = await t.curl("/items", ["--compressed", "-H", "Accept-Encoding: br"]);
    expect(br.headers["content-encoding"]).toBe("br");
    expect(br.body).toBe(json);
    const plain = await t.curl("/items");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.body).toBe(json);
  });

  test("remove headers: X-Powered-By never reaches the service", async () => {
    await using t = await tunnelWith("ngrok-remove-x-powered-by.yml");
    const r = await t.curl("/", ["-H", "X-Powered-By: Express", "-H", "X-Kept: 1"]);
    const seen = JSON.parse(r.body) as Echoed;
    expect(seen.headers["x-powered-by"]).toBeUndefined();
    expect(seen.headers["x-kept"]).toBe("1");
  });

  test("verify-webhook (GitLab): the right X-Gitlab-Token gets the page's 200 answer; a wrong one or none, 403", async () => {
    await using t = await tunnelWith("ngrok-verify-webhook-gitlab.yml");
    const good = await t.curl("/", ["--request", "POST", "--header", "X-Gitlab-Token: secret!"]);
    expect(good.status).toBe(200);
    expect(good.headers["content-type"]).toBe("text/plain");
    expect(good.body).toBe("GitLab webhook verified");
    expect((await t.curl("/", ["--request", "POST", "--header", "X-Gitlab-Token: secret?"])).status).toBe(403);
    expect((await t.curl("/", ["--request", "POST", "--data", "{}"])).status).toBe(403);
  });

  test("basic-auth: user:password1 gets the page's answer; no credentials, 401 with the realm's prompt", async () => {
    await using t = await tunnelWith("ngrok-basic-auth.yml");
    const good = await t.curl("/", ["--header", "Authorization: Basic dXNlcjpwYXNzd29yZDE="]);
    expect(good.status).toBe(200);
    expect(good.body).toBe("Successfully Authenticated!");
    const none = await t.curl("/");
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toContain('realm="sample-realm"');
  });

  test("restrict-ips: a visitor not in allow (127.0.0.1 here) gets 403", async () => {
    await using t = await tunnelWith("ngrok-restrict-ips.yml");
    const r = await t.curl("/");
    expect(r.status).toBe(403);
    expect(r.headers["x-from-service"]).toBeUndefined();
  });

  test("redirect using paths: /products is answered 302 with Location .../store/products", async () => {
    await using t = await tunnelWith("ngrok-redirect-paths.yml");
    const r = await t.curl("/products");
    expect(r.status).toBe(302);
    expect(r.headers.location).toBe(`http://${t.agent.subdomain}.localhost:${t.server.edgePort}/store/products`);
  });

  test("custom-response with content and ${conn.ts.start}: 200, application/json, the connection's start", async () => {
    await using t = await tunnelWith("ngrok-custom-response-json.yml");
    const r = await t.curl("/api/example");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/json");
    const started = Date.parse((JSON.parse(r.body) as { "connection-start": string })["connection-start"]);
    expect(Math.abs(started - Date.now())).toBeLessThan(60_000);
  });

  test("rate limit by Host header: 30 a minute, the 31st gets 429 with retry-after", async () => {
    await using t = await tunnelWith("ngrok-rate-limit-by-host.yml");
    for (let i = 0; i < 30; i++) expect((await t.curl("/get")).status).toBe(200);
    const over = await t.curl("/get");
    expect(over.status).toBe(429);
    expect(Number(over.headers["retry-after"])).toBeGreaterThan(0);
  });

  test("circuit breaker: with error_threshold 0 and volume_threshold 1 the first request trips it; the next is answered 503 at the edge", async () => {
    await using t = await tunnelWith("ngrok-circuit-breaker.yml");
    const first = await t.curl("/x");
    expect(first.status).toBe(200);
    expect(first.headers["x-from-service"]).toBe("yes");
    const next = await t.curl("/x");
    expect(next.status).toBe(503);
    expect(next.headers["x-from-service"]).toBeUndefined();
    expect(next.headers["retry-after"]).toBe("120");
  });

  test("ngrok's flag name: burrow http --traffic-policy-file runs the file as --policy-file does; both at once is refused", async () => {
    const t = await withTunnel({ upstream: echo, args: ["--traffic-policy-file", fixture("ngrok-deny-non-get.yml")] });
    await using _ = t;
    const url = `http://${t.agent.subdomain}.localhost:${t.server.edgePort}/x`;
    expect((await curl(url, ["-X", "POST"])).status).toBe(403);
    expect((await curl(url)).status).toBe(200);
    const both = await runBurrow(["http", "3000", "--token", "brw_x", "--policy-file", fixture("ngrok-deny-non-get.yml"), "--traffic-policy-file", fixture("ngrok-deny-non-get.yml")]);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain("--policy-file and --traffic-policy-file are one flag");
    // a file that cannot be read is named once, with the flag it came by
    const missing = await runBurrow(["http", "3000", "--token", "brw_x", "--traffic-policy-file", "/nonexistent/p.yml"]);
    expect(missing.stderr).toContain("burrow: --traffic-policy-file /nonexistent/p.yml: cannot read it (ENOENT)");
  });
});
