/**
 * The actions that shape a request or answer it: deny, custom-response,
 * redirect, url-rewrite, add-headers, remove-headers, log; and how a run
 * goes: rules in order, expressions that must all hold, the first action
 * that answers ends it, an expression that fails does not match, action
 * variables and interpolation read what earlier actions did.
 */
import { describe, expect, test } from "bun:test";
import { answered, policyOf, requestInput } from "./policy-harness.ts";

describe("deny and custom-response", () => {
  test("deny answers 403 with no body by default, or its status_code; nothing after it runs", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.method == 'DELETE'"]
    actions:
      - type: deny
      - type: add-headers
        config: { headers: { x-after: "1" } }
  - expressions: ["req.url.path.startsWith('/old')"]
    actions:
      - type: deny
        config: { status_code: 410 }
`);
    expect(answered(await p.run("on_http_request", requestInput({ method: "DELETE" })))).toEqual({ status: 403, headers: {}, body: "" });
    const gone = await p.run("on_http_request", requestInput({ target: "/old/page" }));
    expect(answered(gone)?.status).toBe(410);
    expect(gone.matched.map((r) => r.rule)).toEqual(["#2"]);
    const through = await p.run("on_http_request", requestInput({ target: "/new" }));
    expect(through.verdict.kind).toBe("continue");
    expect(through.matched).toEqual([]);
  });

  test("custom-response: status, interpolated body and headers; the content-type inferred when none is given", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.url.path == '/json'"]
    actions:
      - type: custom-response
        config:
          status_code: 418
          body: '{"path": "\${req.url.path}", "ip": "\${conn.client_ip}"}'
          headers: { x-served-by: "policy \${tunnel.name}" }
  - expressions: ["req.url.path == '/html'"]
    actions:
      - type: custom-response
        config: { body: "<h1>down for maintenance</h1>" }
  - actions:
      - type: custom-response
        config: { body: "plain", headers: { content-type: text/csv } }
`);
    expect(answered(await p.run("on_http_request", requestInput({ target: "/json", clientIp: "198.51.100.7" })))).toEqual({
      status: 418,
      headers: { "x-served-by": "policy app", "content-type": "application/json" },
      body: '{"path": "/json", "ip": "198.51.100.7"}',
    });
    expect(answered(await p.run("on_http_request", requestInput({ target: "/html" })))?.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(answered(await p.run("on_http_request", requestInput({ target: "/x" })))?.headers["content-type"]).toBe("text/csv");
  });

  test("custom-response in on_http_response replaces the service's answer", async () => {
    const p = policyOf(`
on_http_response:
  - expressions: ["res.status_code >= 500"]
    actions:
      - type: custom-response
        config: { status_code: 503, body: "the service is having a moment (it said \${res.status_code})" }
`);
    const out = await p.run("on_http_response", requestInput({ response: { status: 502 } }));
    expect(answered(out)).toEqual({ status: 503, headers: { "content-type": "text/plain; charset=utf-8" }, body: "the service is having a moment (it said 502)" });
    expect((await p.run("on_http_response", requestInput({ response: { status: 200 } }))).verdict.kind).toBe("continue");
  });
});

describe("redirect and url-rewrite", () => {
  test("redirect: from/to on the full URL with a group, status_code and headers; an unchanged URL is no redirect", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.url.path.startsWith('/api/')"]
    actions:
      - type: redirect
        config:
          from: /api/v1/users\\?id=([0-9]+)
          to: /api/v2/users/$1/
          status_code: 301
          headers: { x-redirected: "true" }
`);
    const out = await p.run("on_http_request", requestInput({ target: "/api/v1/users?id=42" }));
    const a = answered(out)!;
    expect(a.status).toBe(301);
    expect(a.headers.location).toBe("https://app.tunnels.example.com/api/v2/users/42/");
    expect(a.headers["x-redirected"]).toBe("true");
    const same = await p.run("on_http_request", requestInput({ target: "/api/v3/things" }));
    expect(same.verdict.kind).toBe("continue");
    expect(same.matched[0]!.actions[0]!.note).toContain("did not change");
  });

  test("redirect without from sends everything to `to`, interpolated; 302 by default", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: redirect
        config: { to: "https://elsewhere.example.net\${req.url.path}?from=\${req.host}" }
`);
    const a = answered(await p.run("on_http_request", requestInput({ target: "/a/b" })))!;
    expect(a.status).toBe(302);
    expect(a.headers.location).toBe("https://elsewhere.example.net/a/b?from=app.tunnels.example.com");
  });

  test("url-rewrite changes the path and query the service gets, made normal; later rules see the new URL", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.url.path.startsWith('/products')"]
    actions:
      - type: url-rewrite
        config: { from: "/products/?([a-z]+)?", to: "/products.php?query=$1" }
  - expressions: ["req.url.path == '/products.php'"]
    actions:
      - type: add-headers
        config: { headers: { x-rewritten: "\${req.url.query}" } }
`);
    const out = await p.run("on_http_request", requestInput({ target: "/products/shoes" }));
    expect(out.verdict.kind).toBe("continue");
    expect(out.request!.target).toBe("/products.php?query=shoes");
    expect(out.request!.headers).toContainEqual(["x-rewritten", "query=shoes"]);
  });

  test("url-rewrite may not leave the tunnel's host, nor make a path that cannot be made normal: 400, not forwarded as it was", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.url.path == '/away'"]
    actions:
      - type: url-rewrite
        config: { to: "https://other.example.net/x" }
  - expressions: ["req.url.path == '/slash'"]
    actions:
      - type: url-rewrite
        config: { to: "/a%2Fb" }
`);
    for (const target of ["/away", "/slash"]) {
      const out = await p.run("on_http_request", requestInput({ target }));
      expect(answered(out)?.status).toBe(400);
      expect(out.problems[0]!.message).toContain("url-rewrite");
    }
  });

  test("a from pattern outside RE2 is refused at load, with its line", async () => {
    const { errorsOf } = await import("./policy-harness.ts");
    const [e] = errorsOf(`on_http_request:\n  - actions:\n      - type: redirect\n        config: { from: "(a)\\\\1", to: /x }\n`);
    expect(e).toMatchObject({ code: "ACTION_CONFIG", line: 4, path: "on_http_request[0].actions[0].config.from" });
    expect(e!.message).toContain("not an RE2 regular expression");
  });
});

describe("add-headers and remove-headers", () => {
  test("request headers: added (not replaced) with interpolated values, removed by name in any case", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: remove-headers
        config: { headers: [X-Secret, cookie] }
      - type: add-headers
        config: { headers: { X-Client-IP: "\${conn.client_ip}", x-tag: a } }
      - type: add-headers
        config: { headers: { x-tag: b } }
`);
    const out = await p.run("on_http_request", requestInput({ headers: [["x-secret", "s"], ["Cookie", "a=1"], ["X-Tag", "visitor"]] }));
    const h = out.request!.headers;
    expect(h.find(([n]) => n.toLowerCase() === "x-secret")).toBeUndefined();
    expect(h.find(([n]) => n.toLowerCase() === "cookie")).toBeUndefined();
    expect(h.filter(([n]) => n.toLowerCase() === "x-tag").map(([, v]) => v)).toEqual(["visitor", "a", "b"]);
    expect(h).toContainEqual(["x-client-ip", "203.0.113.10"]);
  });

  test("response headers in on_http_response", async () => {
    const p = policyOf(`
on_http_response:
  - actions:
      - type: remove-headers
        config: { headers: [server] }
      - type: add-headers
        config: { headers: { strict-transport-security: "max-age=63072000" } }
`);
    const out = await p.run("on_http_response", requestInput({ response: { status: 200, headers: [["Server", "nginx/1.2"], ["Content-Type", "text/plain"]] } }));
    expect(out.response!.headers).toEqual([["Content-Type", "text/plain"], ["strict-transport-security", "max-age=63072000"]]);
  });

  test("the headers the edge owns are refused at load, as --request-header-add refuses them", async () => {
    const { errorsOf } = await import("./policy-harness.ts");
    const errors = errorsOf(`on_http_request:
  - actions:
      - type: add-headers
        config: { headers: { Host: evil.example.net, X-Forwarded-For: 1.2.3.4 } }
      - type: remove-headers
        config: { headers: [content-length, "bad name"] }
`);
    expect(errors.map((e) => e.path)).toEqual([
      "on_http_request[0].actions[0].config.headers.Host",
      "on_http_request[0].actions[0].config.headers.X-Forwarded-For",
      "on_http_request[0].actions[1].config.headers[0]",
      "on_http_request[0].actions[1].config.headers[1]",
    ]);
    expect(errors.every((e) => e.code === "ACTION_CONFIG" && e.line !== undefined)).toBe(true);
  });

  test("a value that interpolates a line break is left out, and said, rather than splitting the head", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: add-headers
        config: { headers: { x-echo: "\${req.headers['x-in'][0]}" } }
`);
    const out = await p.run("on_http_request", requestInput({ headers: [["X-In", "a\r\nSet-Cookie: evil=1"]] }));
    expect(out.request!.headers.find(([n]) => n === "x-echo")).toBeUndefined();
    expect(out.problems[0]!.message).toContain("line break");
  });
});

describe("how a run goes", () => {
  test("every expression of a rule must hold; one that fails to evaluate does not match, and is told", async () => {
    const p = policyOf(`
on_http_request:
  - name: api key
    expressions:
      - "req.headers['x-api-key'][0] == 'k1'"
      - "req.method == 'GET'"
    actions:
      - type: custom-response
        config: { body: in }
`);
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["X-Api-Key", "k1"]] })))?.body).toBe("in");
    expect((await p.run("on_http_request", requestInput({ method: "POST", headers: [["X-Api-Key", "k1"]] }))).verdict.kind).toBe("continue");
    const missing = await p.run("on_http_request", requestInput());
    expect(missing.verdict.kind).toBe("continue");
    expect(missing.problems).toEqual([{ code: "EVALUATION_ERROR", rule: "api key", message: expect.stringContaining("x-api-key") }]);
  });

  test("req.headers is read in any case, as ngrok's examples write it", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["'2' in req.headers['X-Api-Version']", "has(req.headers.x_none) == false", "'x-api-version' in req.headers"]
    actions: [{ type: deny, config: { status_code: 400 } }]
`);
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["x-api-version", "2"]] })))?.status).toBe(400);
  });

  test("an action's variables are read by the actions after it (ngrok's actions.ngrok.*)", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: restrict-ips
        config: { enforce: false, allow: [10.0.0.0/8] }
      - type: custom-response
        config: { status_code: 403, body: "restrict-ips would \${actions.ngrok.restrict_ips.action} \${conn.client_ip}" }
`);
    expect(answered(await p.run("on_http_request", requestInput({ clientIp: "192.0.2.1" })))?.body).toBe("restrict-ips would deny 192.0.2.1");
    expect(answered(await p.run("on_http_request", requestInput({ clientIp: "10.1.1.1" })))?.body).toBe("restrict-ips would allow 10.1.1.1");
  });

  test("log: its fields, interpolated, go on the outcome for the inspector and the server's log", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: log
        config: { metadata: { message: "hello \${req.method}", path: "\${req.url.path}", n: 3, missing: "\${req.headers['nope'][0]}" } }
`);
    const out = await p.run("on_http_request", requestInput({ target: "/p" }));
    expect(out.logs).toEqual([{ message: "hello GET", path: "/p", n: 3, missing: "" }]);
    expect(out.problems).toHaveLength(1);
  });

  test("time.now and the request's timestamps", async () => {
    const at = Date.parse("2024-03-05T06:07:08Z");
    const p = policyOf(`
on_http_request:
  - expressions: ["time.now == '2024-03-05T06:07:08Z'", "req.ts.header_received.getFullYear() == 2024", "conn.ts.start.getMonth() == 2"]
    actions: [{ type: deny }]
`);
    expect(answered(await p.run("on_http_request", requestInput({ now: at })))?.status).toBe(403);
  });
});
