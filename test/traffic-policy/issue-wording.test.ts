/**
 * The traffic policy as its users read it, through the real server, agent
 * and curl: every variable under ngrok's name (and burrow's own) with the
 * value and shape it has on a live tunnel, `${...}` in action configs,
 * rules in order with all their expressions and an ending action that
 * stops the rest, ngrok's older `content` for custom-response's body, and
 * a policy written in burrow.yml (inline, or a file beside it) run by
 * `burrow start`.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LineReader } from "../harness/lines.ts";
import { startTokenIssuer } from "../harness/oidc-provider.ts";
import { burrowCommand } from "../harness/server.ts";
import { withServer, withTunnel } from "../harness/tunnel.ts";
import { curl } from "./curl.ts";
import { echo, policyFile, withPolicy, type Echoed } from "./rig.ts";

setDefaultTimeout(60_000);

describe("variables on a live tunnel, under the names the policy page gives", () => {
  test("conn.*, req.*, endpoint.host, tunnel.*, user.name: their values and shapes for one curl request", async () => {
    // each value in one JSON answer: interpolation writes a list, a map or a number as JSON, a string as its text (quoted here)
    const fields = [
      "conn.client_ip",
      "conn.client_port",
      "string(conn.ts.start)",
      "req.method",
      "req.url",
      "req.url.path",
      "req.url.query",
      "req.url.host",
      "req.headers['x-multi']",
      "req.headers['X-Multi']",
      "req.query_params",
      "req.host",
      "req.user_agent",
      "endpoint.host",
      "tunnel.name",
      "tunnel.kind",
    ];
    const raw = new Set(["conn.client_port", "req.headers['x-multi']", "req.headers['X-Multi']", "req.query_params"]);
    const body = `{${fields.map((f, i) => (raw.has(f) ? `"f${i}": \${${f}}` : `"f${i}": "\${${f}}"`)).join(", ")}}`;
    await using t = await withPolicy(
      `on_http_request:
  - name: who
    expressions: ["req.url.path == '/vars'"]
    actions:
      - type: custom-response
        config:
          status_code: 200
          headers: { content-type: application/json, x-user: "\${user.name}", x-visitor: "[\${visitor.identity}]" }
          body: '${body.replaceAll("'", "''")}'
`,
      { username: "wording" },
    );
    const r = await t.curl("/vars?a=1&a=2&b=x", ["-H", "X-Multi: one", "-H", "x-multi: two", "-A", "wording-agent/1.0"]);
    expect(r.status).toBe(200);
    const v = JSON.parse(r.body) as Record<string, unknown>;
    const host = `${t.agent.subdomain}.localhost`;
    const got = Object.fromEntries(fields.map((f, i) => [f, v[`f${i}`]]));
    expect(got).toMatchObject({
      "conn.client_ip": "127.0.0.1",
      "req.method": "GET",
      "req.url": `http://${host}:${t.server.edgePort}/vars?a=1&a=2&b=x`,
      "req.url.path": "/vars",
      "req.url.query": "a=1&a=2&b=x",
      "req.url.host": host,
      "req.headers['x-multi']": ["one", "two"],
      "req.headers['X-Multi']": ["one", "two"],
      "req.query_params": { a: ["1", "2"], b: ["x"] },
      "req.host": `${host}:${t.server.edgePort}`,
      "req.user_agent": "wording-agent/1.0",
      "endpoint.host": host,
      "tunnel.name": t.agent.subdomain,
      "tunnel.kind": "http",
    });
    expect(typeof got["conn.client_port"]).toBe("number");
    expect(got["conn.client_port"]).toBeGreaterThan(0);
    expect(Math.abs(Date.parse(got["string(conn.ts.start)"] as string) - Date.now())).toBeLessThan(60_000);
    expect(r.headers["x-user"]).toBe("wording");
    expect(r.headers["x-visitor"]).toBe("[]");
  });

  test("res.status_code and res.headers in on_http_response; visitor.identity after basic-auth; inCidrRange and inCidrRanges", async () => {
    await using t = await withPolicy(
      `on_http_request:
  - expressions: ["req.url.path == '/in'", "inCidrRange(conn.client_ip, '127.0.0.0/8')", "inCidrRanges(conn.client_ip, ['10.0.0.0/8', '127.0.0.1/32'])"]
    actions: [{ type: custom-response, config: { status_code: 202, body: in range } }]
  - expressions: ["req.url.path == '/out'", "inCidrRanges(conn.client_ip, ['10.0.0.0/8', '192.168.0.0/16'])"]
    actions: [{ type: custom-response, config: { status_code: 202, body: wrongly in range } }]
  - expressions: ["req.url.path.startsWith('/private')"]
    actions:
      - type: basic-auth
        config: { credentials: ["alice:s3cret"] }
      - type: add-headers
        config: { headers: { x-visitor: "\${visitor.identity}" } }
on_http_response:
  - expressions: ["res.status_code == 200", "res.headers['x-from-service'] == ['yes']"]
    actions:
      - type: add-headers
        config: { headers: { x-seen: "status \${res.status_code}, type \${res.headers['content-type'][0]}" } }
`,
    );
    expect((await t.curl("/in")).status).toBe(202);
    const out = await t.curl("/out");
    expect(out.status).toBe(200);
    expect(out.headers["x-seen"]).toBe("status 200, type application/json;charset=utf-8");
    expect((await t.curl("/private")).status).toBe(401);
    const signedIn = await t.curl("/private", ["-u", "alice:s3cret"]);
    expect(signedIn.status).toBe(200);
    expect((JSON.parse(signedIn.body) as Echoed).headers["x-visitor"]).toBe("alice");
  });
});

describe("ngrok's other request and response variables", () => {
  test("req.content_type with .raw and .parameters, req.content_encoding, req.location; res.content_type.raw and .parameters", async () => {
    await using t = await withPolicy(`on_http_request:
  - expressions:
      - "req.content_type == 'application/json'"
      - "req.content_type.raw == 'Application/JSON; Charset=\\"utf-8\\"'"
      - "req.content_type.parameters['charset'] == 'utf-8'"
      - "req.content_encoding == ['identity']"
      - "req.location == '/index.html'"
    actions: [{ type: custom-response, config: { status_code: 299, body: "\${req.content_type.parameters}" } }]
on_http_response:
  - expressions: ["res.content_type.raw == 'application/json;charset=utf-8'", "res.content_type.parameters['charset'] == 'utf-8'"]
    actions: [{ type: add-headers, config: { headers: { x-charset: "\${res.content_type.parameters['charset']}" } } }]
`);
    const asked = await t.curl("/x", ["-H", 'Content-Type: Application/JSON; Charset="utf-8"', "-H", "Content-Encoding: identity", "-H", "Location: /index.html"]);
    expect(asked.status).toBe(299);
    expect(JSON.parse(asked.body)).toEqual({ charset: "utf-8" });
    const plain = await t.curl("/x");
    expect(plain.status).toBe(200);
    expect(plain.headers["x-charset"]).toBe("utf-8");
  });
});

describe("rules and actions, as the page writes them", () => {
  test("every expression must hold; none means always; rules run in order; an ending action stops the rest, its own rule's later actions too", async () => {
    await using t = await withPolicy(`on_http_request:
  - name: tag everything
    actions: [{ type: add-headers, config: { headers: { x-first: "1" } } }]
  - name: both must hold
    expressions: ["req.method == 'POST'", "req.url.path == '/both'"]
    actions:
      - type: custom-response
        config: { status_code: 418, body: both }
      - type: add-headers
        config: { headers: { x-never: "1" } }
  - name: after
    actions: [{ type: add-headers, config: { headers: { x-after: "1" } } }]
`);
    const both = await t.curl("/both", ["-X", "POST"]);
    expect(both.status).toBe(418);
    expect(both.body).toBe("both");
    const one = await t.curl("/both");
    const seen = JSON.parse(one.body) as Echoed;
    expect(seen.headers["x-first"]).toBe("1");
    expect(seen.headers["x-after"]).toBe("1");
    expect(seen.headers["x-never"]).toBeUndefined();
  });

  test("custom-response's body given as ngrok's older `content`, with ${...}; the status defaults to 200", async () => {
    await using t = await withPolicy(`on_http_request:
  - expressions: ["req.url.path == '/api/example'"]
    actions:
      - type: custom-response
        config:
          content: '{"connection-start":"\${conn.ts.start}"}'
          headers:
            content-type: application/json
`);
    const r = await t.curl("/api/example");
    expect(r.status).toBe(200);
    expect(r.headers["content-type"]).toBe("application/json");
    expect(Number.isNaN(Date.parse((JSON.parse(r.body) as { "connection-start": string })["connection-start"]))).toBe(false);
  });
});

describe("ngrok's rand macros", () => {
  test("rand.double() splits requests (ngrok's A/B example's rule, with url-rewrite): each request draws anew; rand.int stays in its bounds", async () => {
    await using t = await withPolicy(`on_http_request:
  - expressions:
      - rand.double() <= 0.5
    actions:
      - type: url-rewrite
        config:
          from: "/path/to/test"
          to: "/path/to/test-b"
  - actions:
      - type: add-headers
        config: { headers: { x-die: "\${rand.int(1, 6)}" } }
`);
    const paths = new Set<string>();
    const dice = new Set<string>();
    for (let i = 0; i < 60; i++) {
      const seen = JSON.parse((await t.curl("/path/to/test")).body) as Echoed;
      paths.add(seen.path);
      dice.add(seen.headers["x-die"]!);
    }
    expect([...paths].sort()).toEqual(["/path/to/test", "/path/to/test-b"]);
    expect([...dice].every((d) => /^[1-6]$/.test(d))).toBe(true);
    expect(dice.size).toBeGreaterThan(1);
  });
});

describe("ngrok's string macros", () => {
  test("encodeBase64, decodeBase64, escapeUrl, unescapeUrl, isPrivateIp, isJson, isURL, rand.int()", async () => {
    await using t = await withPolicy(`on_http_request:
  - expressions:
      - "rand.int() <= 1"
      - "'some:thing'.encodeBase64() == 'c29tZTp0aGluZw=='"
      - "getReqHeader('x-b64')[0].decodeBase64() == 'some:thing'"
      - "'i;md/r/$y'.escapeUrl() == 'i%3Bmd%2Fr%2F%24y'"
      - "'i%3Bmd%2Fr%2F%24y'.unescapeUrl() == 'i;md/r/$y'"
      - "'192.168.1.1'.isPrivateIp() && '172.20.0.1'.isPrivateIp() && !'8.8.8.8'.isPrivateIp() && !'nope'.isPrivateIp()"
      - "getReqHeader('x-json')[0].isJson() && !'not json'.isJson()"
      - "'https://ngrok.com'.isURL() && !'not a url'.isURL()"
    actions: [{ type: custom-response, config: { status_code: 299, body: all hold } }]
`);
    const r = await t.curl("/", ["-H", "x-b64: c29tZTp0aGluZw==", "-H", 'x-json: {"a":"b"}']);
    expect(r.status).toBe(299);
    expect(r.body).toBe("all hold");
    expect((await t.curl("/", ["-H", "x-b64: c29tZTp0aGluZw==", "-H", "x-json: {nope"])).status).toBe(200);
  });
});

describe("jwt-validation's tokens from a cookie", () => {
  test("a good token in the named cookie passes (its sub is visitor.identity); none, or one from another audience, 401", async () => {
    await using provider = await startTokenIssuer();
    await using t = await withPolicy(
      `on_http_request:
  - actions:
      - type: jwt-validation
        config:
          issuer: { allow_list: [{ value: "${provider.issuer}" }] }
          audience: { allow_list: [{ value: "urn:api" }] }
          http: { tokens: [{ type: jwt, method: cookie, name: session }] }
          jws: { allowed_algorithms: [RS256], keys: { sources: { additional_jkus: ["${provider.issuer}/jwks"] } } }
      - type: add-headers
        config: { headers: { x-sub: "\${visitor.identity}" } }
`,
      { server: { args: ["--oidc-http-issuers", "loopback"] } },
    );
    const good = await t.curl("/", ["--cookie", `theme=dark; session=${await provider.token("urn:api")}`]);
    expect(good.status).toBe(200);
    expect((JSON.parse(good.body) as Echoed).headers["x-sub"]).toBeTruthy();
    expect((await t.curl("/")).status).toBe(401);
    expect((await t.curl("/", ["--cookie", `session=${await provider.token("urn:other")}`])).status).toBe(401);
  });
});

describe("compress-response: its codings, and where it never compresses", () => {
  test("zstd read back by curl --compressed; never on a body the service encoded; never on a range", async () => {
    const text = "burrow ".repeat(2000);
    const gz = Bun.gzipSync(new TextEncoder().encode(text));
    await using t = await withPolicy("on_http_response:\n  - actions: [{ type: compress-response }]\n", {
      upstream: (req) => {
        const path = new URL(req.url).pathname;
        if (path === "/encoded") return new Response(gz, { headers: { "content-type": "text/plain", "content-encoding": "gzip" } });
        if (path === "/range") return new Response(text.slice(0, 100), { status: 206, headers: { "content-type": "text/plain", "content-range": `bytes 0-99/${text.length}` } });
        return new Response(text, { headers: { "content-type": "text/plain" } });
      },
    });
    const zstd = await t.curl("/", ["--compressed", "-H", "Accept-Encoding: zstd"]);
    expect(zstd.headers["content-encoding"]).toBe("zstd");
    expect(zstd.body).toBe(text);
    // the service's own gzip passes as it is: once encoded, never twice
    const encoded = await t.curl("/encoded", ["-H", "Accept-Encoding: br, gzip", "-o", "-"]);
    expect(encoded.headers["content-encoding"]).toBe("gzip");
    const twice = await t.curl("/encoded", ["--compressed", "-H", "Accept-Encoding: br, gzip"]);
    expect(twice.body).toBe(text);
    const ranged = await t.curl("/range", ["--compressed", "-H", "Range: bytes=0-99"]);
    expect(ranged.status).toBe(206);
    expect(ranged.headers["content-encoding"]).toBeUndefined();
    expect(ranged.body).toBe(text.slice(0, 100));
  });
});

describe("on HTTP/2 streams", () => {
  test("curl over h2c (prior knowledge): every stream meets the request rules, deny and rate limit alike; req.version is ngrok's HTTP/2.0 (HTTP/1.1 over HTTP/1.1)", async () => {
    await using t = await withPolicy(`on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny, config: { status_code: 404 } }]
  - actions:
      - type: rate-limit
        config: { name: h2, algorithm: sliding_window, capacity: 3, rate: 60s, bucket_key: [conn.client_ip] }
      - type: add-headers
        config: { headers: { x-version: "\${req.version}" } }
`);
    const h2 = ["--http2-prior-knowledge"];
    const denied = await t.curl("/admin", h2);
    expect(denied.status).toBe(404);
    const through = await t.curl("/x", h2);
    expect(through.status).toBe(200);
    expect((JSON.parse(through.body) as Echoed).headers["x-version"]).toBe("HTTP/2.0");
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await t.curl("/x", h2)).status);
    expect(statuses).toEqual([200, 200, 429]);
    await using h1 = await withPolicy("on_http_request:\n  - actions: [{ type: add-headers, config: { headers: { x-version: \"\${req.version}\" } } }]\n");
    expect((JSON.parse((await h1.curl("/", ["--http1.1"])).body) as Echoed).headers["x-version"]).toBe("HTTP/1.1");
    expect((JSON.parse((await h1.curl("/", ["--http1.0"])).body) as Echoed).headers["x-version"]).toBe("HTTP/1.0");
  });
});

/** What a tcp echo service behind a tunnel says to one connection that sends `text` ("" when it is closed first). */
function talk(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const sock = connect(port, "127.0.0.1");
    const done = () => (clearTimeout(timer), sock.destroy(), resolve(got));
    const timer = setTimeout(done, 10_000);
    sock.on("data", (d) => {
      got += d.toString();
      if (got === "ready\n") sock.write(text);
      if (got.endsWith(text)) done();
    });
    sock.on("close", done);
    sock.on("error", done);
  });
}

describe("a tcp tunnel's variables in on_tcp_connect", () => {
  test("tunnel.kind, endpoint.protocol, endpoint.host (the server's domain), conn.client_ip and conn.client_port hold for a tcp visitor: a rule on them closes it; one on http's kind does not", async () => {
    using closing = policyFile(`on_tcp_connect:
  - expressions: ["tunnel.kind == 'tcp'", "endpoint.protocol == 'tcp'", "endpoint.host == 'localhost'", "endpoint.url.startsWith('tcp://localhost:')", "conn.client_ip == '127.0.0.1'", "conn.client_port > 0", "inCidrRange(conn.client_ip, '127.0.0.0/8')"]
    actions: [{ type: deny }]
`);
    await using t = await withTunnel({ kind: "tcp", upstream: { echo: true }, args: ["--policy-file", closing.path] });
    expect(await talk(t.agent.port!, "hello")).toBe("");
    using open = policyFile("on_tcp_connect:\n  - expressions: [\"tunnel.kind == 'http'\"]\n    actions: [{ type: deny }]\n");
    const other = await t.startAgent({ kind: "tcp", target: t.upstreamPort, args: ["--policy-file", open.path] });
    expect(await talk(other.port!, "hello")).toBe("ready\nhello");
  });
});

describe("burrow.yml's policy: key", () => {
  test("burrow start runs a policy written in burrow.yml and one in a file beside it, each on its own tunnel", async () => {
    await using rig = await withServer({ username: "yml-owner" });
    const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
    const dir = mkdtempSync(join(tmpdir(), "burrow-yml-policy-"));
    let proc: ReturnType<typeof Bun.spawn> | undefined;
    try {
      writeFileSync(join(dir, "api-policy.yml"), "on_http_request:\n  - expressions: [\"req.url.path == '/teapot'\"]\n    actions: [{ type: custom-response, config: { status_code: 418, body: from the file } }]\n");
      writeFileSync(
        join(dir, "burrow.yml"),
        `server: ${rig.server.edgeUrl}
token: ${rig.token}
tunnels:
  web:
    proto: http
    addr: 127.0.0.1:${service.port}
    subdomain: yml-inline
    policy:
      on_http_request:
        - expressions: ["req.method == 'DELETE'"]
          actions: [{ type: deny, config: { status_code: 405 } }]
  api:
    proto: http
    addr: 127.0.0.1:${service.port}
    subdomain: yml-file
    policy: api-policy.yml
`,
      );
      proc = Bun.spawn([...burrowCommand(), "start", "--all", "--log", "text", "--no-inspect"], {
        cwd: dir,
        env: { ...process.env, XDG_CONFIG_HOME: join(dir, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const output = new LineReader(proc as never);
      await Promise.all(["web", "api"].map((n) => output.waitFor(new RegExp(`Forwarding\\s+${n}\\s`), 15_000)));
      const at = (sub: string, path: string, args: string[] = []) => curl(`http://${sub}.localhost:${rig.server.edgePort}${path}`, args);
      expect((await at("yml-inline", "/x", ["-X", "DELETE"])).status).toBe(405);
      expect((await at("yml-inline", "/x")).status).toBe(200);
      const teapot = await at("yml-file", "/teapot");
      expect(teapot.status).toBe(418);
      expect(teapot.body).toBe("from the file");
      expect((await at("yml-file", "/x", ["-X", "DELETE"])).status).toBe(200);
    } finally {
      if (proc && proc.exitCode === null) {
        proc.kill("SIGTERM");
        await Promise.race([proc.exited, Bun.sleep(5_000)]);
        if (proc.exitCode === null) proc.kill("SIGKILL");
      }
      service.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
