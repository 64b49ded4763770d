/**
 * A tunnel's own traffic policy (`burrow http --policy-file`) run by the
 * edge on every request and response, each action through a real tunnel
 * to a real service, with curl: deny, custom-response, redirect (followed),
 * url-rewrite, add-headers and remove-headers both ways, rate-limit (429
 * and Retry-After), restrict-ips, basic-auth, compress-response (read
 * back by curl --compressed).
 */
import { describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { gunzipSync } from "node:zlib";
import { rawHttp } from "../harness/raw-http.ts";
import { withPolicy, type Echoed } from "./rig.ts";

describe("a tunnel's own policy, action by action", () => {
  test("deny and custom-response answer at the edge; other requests reach the service", async () => {
    await using t = await withPolicy(`
on_http_request:
  - name: no admin
    expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny, config: { status_code: 404 } }]
  - name: health
    expressions: ["req.url.path == '/health'"]
    actions:
      - type: custom-response
        config: { status_code: 200, body: '{"ok": true, "ip": "\${conn.client_ip}"}', headers: { x-answered-by: edge } }
`);
    const denied = await t.curl("/admin/users");
    expect(denied.status).toBe(404);
    expect(denied.headers["x-from-service"]).toBeUndefined();
    const health = await t.curl("/health");
    expect(health.status).toBe(200);
    expect(health.headers["x-answered-by"]).toBe("edge");
    expect(health.headers["content-type"]).toContain("application/json");
    expect(JSON.parse(health.body)).toEqual({ ok: true, ip: "127.0.0.1" });
    const through = await t.curl("/hello");
    expect(through.status).toBe(200);
    expect((JSON.parse(through.body) as Echoed).path).toBe("/hello");
  });

  test("redirect is followed by curl to where the policy sends it; url-rewrite changes what the service gets, not what the visitor sees", async () => {
    await using t = await withPolicy(`
on_http_request:
  - actions:
      - type: redirect
        config: { from: "/old/([a-z]+)$", to: "/new/$1", status_code: 301 }
      - type: url-rewrite
        config: { from: "/new/([a-z]+)$", to: "/internal/$1?rewritten=1" }
`);
    const followed = await t.curl("/old/page", ["-L"]);
    expect(followed.statuses).toEqual([301, 200]);
    expect((JSON.parse(followed.body) as Echoed).path).toBe("/internal/page?rewritten=1");
    const direct = await t.curl("/new/thing");
    expect(direct.status).toBe(200);
    expect((JSON.parse(direct.body) as Echoed).path).toBe("/internal/thing?rewritten=1");
  });

  test("add-headers and remove-headers on the request reach the service; on the response, the visitor", async () => {
    await using t = await withPolicy(`
on_http_request:
  - actions:
      - type: remove-headers
        config: { headers: [x-secret] }
      - type: add-headers
        config: { headers: { x-client-ip: "\${conn.client_ip}", x-path: "\${req.url.path}" } }
on_http_response:
  - actions:
      - type: remove-headers
        config: { headers: [x-from-service] }
      - type: add-headers
        config: { headers: { strict-transport-security: "max-age=63072000", x-status: "\${string(res.status_code)}" } }
`);
    const r = await t.curl("/a/b", ["-H", "X-Secret: hunter2"]);
    expect(r.status).toBe(200);
    const seen = JSON.parse(r.body) as Echoed;
    expect(seen.headers["x-secret"]).toBeUndefined();
    expect(seen.headers["x-client-ip"]).toBe("127.0.0.1");
    expect(seen.headers["x-path"]).toBe("/a/b");
    expect(r.headers["x-from-service"]).toBeUndefined();
    expect(r.headers["strict-transport-security"]).toBe("max-age=63072000");
    expect(r.headers["x-status"]).toBe("200");
  });

  test("rate-limit: past the capacity 429 with Retry-After, the service not reached", async () => {
    let reached = 0;
    await using t = await withPolicy(
      `
on_http_request:
  - actions:
      - type: rate-limit
        config: { name: per-ip, algorithm: sliding_window, capacity: 3, rate: 60s, bucket_key: [conn.client_ip] }
`,
      { upstream: () => (reached++, new Response("ok")) },
    );
    const statuses = [];
    for (let i = 0; i < 5; i++) statuses.push(await t.curl("/"));
    expect(statuses.map((r) => r.status)).toEqual([200, 200, 200, 429, 429]);
    expect(Number(statuses[3]!.headers["retry-after"])).toBeGreaterThan(0);
    expect(reached).toBe(3);
  });

  test("restrict-ips: a visitor outside allow is refused; deny wins", async () => {
    await using refused = await withPolicy(`
on_http_request:
  - actions: [{ type: restrict-ips, config: { allow: [10.0.0.0/8] } }]
`);
    expect((await refused.curl("/")).status).toBe(403);
    await using denied = await withPolicy(`
on_http_request:
  - actions: [{ type: restrict-ips, config: { allow: [127.0.0.0/8], deny: [127.0.0.1/32] } }]
`);
    expect((await denied.curl("/")).status).toBe(403);
    await using allowed = await withPolicy(`
on_http_request:
  - actions: [{ type: restrict-ips, config: { allow: [127.0.0.0/8, "::1"] } }]
`);
    expect((await allowed.curl("/")).status).toBe(200);
  });

  test("basic-auth: 401 with the prompt without credentials, through with them, and the password goes no further", async () => {
    await using t = await withPolicy(`
on_http_request:
  - actions: [{ type: basic-auth, config: { credentials: ["alice:correct horse"], realm: demo } }]
  - actions: [{ type: add-headers, config: { headers: { x-visitor: "\${visitor.identity}" } } }]
`);
    const none = await t.curl("/");
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toContain('Basic realm="demo"');
    expect((await t.curl("/", ["-u", "alice:wrong"])).status).toBe(401);
    const good = await t.curl("/", ["-u", "alice:correct horse"]);
    expect(good.status).toBe(200);
    const seen = JSON.parse(good.body) as Echoed;
    expect(seen.headers.authorization).toBeUndefined();
    expect(seen.headers["x-visitor"]).toBe("alice");
  });

  test("compress-response: curl --compressed reads back what the service sent; without Accept-Encoding it is sent as it is", async () => {
    const text = "burrow compresses this line. ".repeat(2000);
    await using t = await withPolicy(
      `
on_http_response:
  - actions: [{ type: compress-response, config: { algorithms: [gzip, br] } }]
`,
      { upstream: () => new Response(text, { headers: { "content-type": "text/plain", etag: '"v1"' } }) },
    );
    const gz = await t.curl("/", ["--compressed", "-H", "Accept-Encoding: gzip"]);
    expect(gz.status).toBe(200);
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.headers["content-length"]).toBeUndefined();
    expect(gz.headers.vary).toContain("Accept-Encoding");
    expect(gz.headers.etag).toBe('W/"v1"');
    expect(gz.body).toBe(text);
    const br = await t.curl("/", ["--compressed", "-H", "Accept-Encoding: br;q=1, gzip;q=0.5"]);
    expect(br.headers["content-encoding"]).toBe("br");
    expect(br.body).toBe(text);
    const plain = await t.curl("/");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    expect(plain.body).toBe(text);
    // the body on the wire is the compressed one, not the same bytes relabelled
    const raw = await fetch(t.url("/"), { headers: { "accept-encoding": "gzip" }, decompress: false } as RequestInit);
    const wire = new Uint8Array(await raw.arrayBuffer());
    expect(wire.byteLength).toBeLessThan(text.length / 10);
    expect(gunzipSync(wire).toString()).toBe(text);
  });

  test("compress-response to an HTTP/1.0 visitor: no chunks, the body ends with the connection, which the head says", async () => {
    const text = "an HTTP/1.0 visitor reads this. ".repeat(500);
    await using t = await withPolicy("on_http_response:\n  - actions: [{ type: compress-response, config: { algorithms: [gzip] } }]\n", { upstream: () => new Response(text) });
    const r = await rawHttp(t.server.edgePort, `GET / HTTP/1.0\r\nHost: ${t.agent.subdomain}.localhost:${t.server.edgePort}\r\nAccept-Encoding: gzip\r\n\r\n`);
    expect(r.status).toBe(200);
    expect(r.closed).toBe(true);
    expect(r.head.toLowerCase()).toContain("content-encoding: gzip");
    expect(r.head.toLowerCase()).toContain("connection: close");
    expect(r.head.toLowerCase()).not.toContain("transfer-encoding");
    expect(gunzipSync(Buffer.from(r.body, "latin1")).toString()).toBe(text);
  });

  test("log: its fields go into the server's structured log, with the policy and the tunnel", async () => {
    await using t = await withPolicy(`
on_http_request:
  - actions: [{ type: log, config: { metadata: { message: "seen \${req.url.path}", marker: policy-log-test } } }]
`);
    expect((await t.curl("/logged")).status).toBe(200);
    const line = await t.server.output.waitFor(/traffic policy log.*policy-log-test|policy-log-test.*traffic policy log/, 5_000);
    expect(line).toContain("seen /logged");
  });
});

describe("the rules that matched", () => {
  test("the service (and its inspector) is told which of the tunnel's rules matched its request; a visitor's own such field never passes", async () => {
    await using t = await withPolicy(`
on_http_request:
  - name: api calls
    expressions: ["req.url.path.startsWith('/api')"]
    actions: [{ type: add-headers, config: { headers: { x-api: "1" } } }]
  - expressions: ["req.method == 'GET'"]
    actions: []
  - name: never
    expressions: ["req.method == 'PATCH'"]
    actions: [{ type: deny }]
`);
    const seen = JSON.parse((await t.curl("/api/x", ["-H", "X-Burrow-Policy-Rules: forged"])).body) as Echoed;
    expect(seen.headers["x-burrow-policy-rules"]).toBe("api calls, #2");
    const none = JSON.parse((await t.curl("/other", ["-X", "POST", "-H", "X-Burrow-Policy-Rules: forged"])).body) as Echoed;
    expect(none.headers["x-burrow-policy-rules"]).toBeUndefined();
  });
});

describe("a response through the policies on a kept-alive connection", () => {
  test("1,500 pipelined requests whose responses the visitor reads late: every one answered (the agent's credit comes back after each)", async () => {
    const body = "r".repeat(2048);
    await using t = await withPolicy("on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-seen: yes } } }]\n", { upstream: () => new Response(body) });
    const host = `${t.agent.subdomain}.localhost:${t.server.edgePort}`;
    const n = 1500;
    const got = await new Promise<number>((resolve, reject) => {
      const sock = connect(t.server.edgePort, "127.0.0.1", () => {
        sock.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`.repeat(n));
        // not read for a while: the edge's writes wait in the socket
        sock.pause();
        setTimeout(() => sock.resume(), 1_000);
      });
      let text = "";
      let answers = 0;
      sock.on("data", (d) => {
        text += d.toString("latin1");
        let i;
        while ((i = text.indexOf("x-seen: yes")) >= 0) {
          answers++;
          text = text.slice(i + 11);
        }
        if (answers === n) (clearTimeout(timer), sock.destroy(), resolve(answers));
      });
      sock.on("error", reject);
      const timer = setTimeout(() => (sock.destroy(), resolve(answers)), 20_000);
    });
    expect(got).toBe(n);
  }, 40_000);
});
