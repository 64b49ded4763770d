/**
 * http-request in the engine, sent by the edge's client (its real bounds
 * and address checks) to a real service on loopback: what it sends
 * (interpolated URL, query, headers, body), what later rules read of its
 * answer, on_error's continue and halt, and the hostile cases: loopback,
 * ::1, the metadata address, names that are this machine, a slow target,
 * a huge answer, too many out at once (on the node, for one tunnel),
 * a loop. Loopback is reached only
 * by a client made with allowPrivate; the same requests without it are
 * the refusals.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import { OutgoingRequests } from "../../src/edge/traffic-policy/outgoing-requests.ts";
import { defaultServices } from "../../src/policy/index.ts";
import { asking, header, loopbackClient, loopbackServices } from "./http-request-harness.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

let target: ReturnType<typeof Bun.serve>;
let base: string;
/** Where /to-inside sends the client, when a test sets it. */
let redirectTo: string | undefined;
/** Requests the target got: method, path and query, headers, body. */
const seen: { method: string; path: string; headers: Record<string, string>; body: string }[] = [];

beforeAll(() => {
  target = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const headers: Record<string, string> = {};
      req.headers.forEach((v, k) => (headers[k] = v));
      seen.push({ method: req.method, path: url.pathname + url.search, headers, body: await req.text() });
      if (url.pathname === "/slow") return held(req);
      if (url.pathname === "/huge") return new Response("x".repeat(1024 * 1024));
      if (url.pathname.startsWith("/hop/")) {
        const n = Number(url.pathname.slice(5));
        return n > 0 ? Response.redirect(`${base}/hop/${n - 1}`, 302) : Response.json({ arrived: true });
      }
      if (url.pathname === "/to-inside" && redirectTo) return Response.redirect(redirectTo, 302);
      if (url.pathname === "/fail") return new Response("down", { status: 503 });
      return Response.json({ user: headers["x-user"] ?? null, role: "admin" }, { headers: { "x-answer": "yes" } });
    },
  });
  base = `http://127.0.0.1:${target.port}`;
});

afterAll(() => target?.stop(true));

const client = loopbackClient;
const services = loopbackServices;


describe("http-request: what it sends and what later rules read", () => {
  test("the URL, query parameters, headers and body are interpolated; the answer's status, headers and body are read by the next rule", async () => {
    const p = policyOf(
      `
on_http_request:
  - actions:
      - type: http-request
        config:
          url: "${base}/users/\${req.url.path.split('/')[2]}"
          method: POST
          query_params:
            - { key: trace, value: "true" }
            - { key: from, value: "\${conn.client_ip}" }
          headers: { x-user: "\${req.headers['x-user'][0]}", content-type: application/json }
          body: '{"path": "\${req.url.path}"}'
  - expressions: ["actions.ngrok.http_request.res.status_code == 200", "json.decode(actions.ngrok.http_request.res.body).role == 'admin'"]
    actions:
      - type: add-headers
        config: { headers: { x-role: "\${json.decode(actions.ngrok.http_request.res.body).role}", x-answer: "\${actions.ngrok.http_request.res.header['x-answer'][0]}", x-method: "\${actions.ngrok.http_request.req.method}" } }
`,
      { services: services() },
    );
    seen.length = 0;
    const out = await p.run("on_http_request", requestInput({ target: "/users/ada", headers: [["x-user", "ada"]] }));
    expect(out.verdict.kind).toBe("continue");
    expect(seen).toHaveLength(1);
    expect(seen[0]!.method).toBe("POST");
    expect(seen[0]!.path).toBe("/users/ada?trace=true&from=203.0.113.10");
    expect(seen[0]!.headers["x-user"]).toBe("ada");
    expect(seen[0]!.headers["x-forwarded-for"]).toBe("203.0.113.10");
    expect(seen[0]!.headers["burrow-http-request-hops"]).toBe("1");
    expect(JSON.parse(seen[0]!.body)).toEqual({ path: "/users/ada" });
    expect(header(out, "x-role")).toBe("admin");
    expect(header(out, "x-answer")).toBe("yes");
    expect(header(out, "x-method")).toBe("POST");
    // the trace names the host, never the path or query
    expect(out.matched[0]!.actions[0]!.note).toMatch(/^POST 127\.0\.0\.1:\d+: 200 in \d+ ms$/);
  });

  test("in on_http_response too, with the response's facts", async () => {
    const p = policyOf(
      `
on_http_response:
  - actions:
      - type: http-request
        config: { url: "${base}/status/\${res.status_code}" }
      - type: add-headers
        config: { headers: { x-checked: "\${string(actions.ngrok.http_request.res.status_code)}" } }
`,
      { services: services() },
    );
    seen.length = 0;
    const out = await p.run("on_http_response", requestInput({ response: { status: 418 } }));
    expect(seen[0]!.path).toBe("/status/418");
    expect(out.response!.headers).toContainEqual(["x-checked", "200"]);
  });

  test("an answer that is an error (503) is an answer: its status is read, nothing failed", async () => {
    const out = await asking(`{ url: "${base}/fail", on_error: halt }`).run("on_http_request", requestInput());
    expect(out.verdict.kind).toBe("continue");
    expect(header(out, "x-status")).toBe("503");
    expect(header(out, "x-error")).toBe("none");
  });

  test("redirects: not followed by default (the 3xx is the answer), followed up to max_redirects, past it a failure", async () => {
    const none = await asking(`{ url: "${base}/hop/2" }`).run("on_http_request", requestInput());
    expect(header(none, "x-status")).toBe("302");
    const followed = await asking(`{ url: "${base}/hop/2", max_redirects: 2 }`).run("on_http_request", requestInput());
    expect(header(followed, "x-status")).toBe("200");
    const past = await asking(`{ url: "${base}/hop/3", max_redirects: 2 }`).run("on_http_request", requestInput());
    expect(header(past, "x-error")).toBe("HTTP_REQUEST_TOO_MANY_REDIRECTS");
  });

  test("a URL that does not interpolate, or interpolates to no URL, fails the request before anything is sent", async () => {
    seen.length = 0;
    const missing = await asking(`{ url: "${base}/\${req.headers['x-missing'][0]}" }`).run("on_http_request", requestInput());
    expect(header(missing, "x-error")).toBe("HTTP_REQUEST_INTERPOLATION_FAILED");
    const notUrl = await asking(`{ url: "\${req.headers['x-to'][0]}" }`).run("on_http_request", requestInput({ headers: [["x-to", "file:///etc/passwd"]] }));
    expect(header(notUrl, "x-error")).toBe("HTTP_REQUEST_BAD_URL");
    expect(seen).toHaveLength(0);
  });

  test("without a client (the offline commands) the action fails as unavailable, and the run goes on", async () => {
    const p = policyOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${base}/" }\n`, { services: defaultServices() });
    const out = await p.run("on_http_request", requestInput());
    expect(out.verdict.kind).toBe("continue");
    expect(out.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_UNAVAILABLE");
  });
});

describe("http-request: refused targets (a tunnel's policy must not reach into the server's network)", () => {
  const refused = async (url: string) => {
    const out = await asking(`{ url: "${url}" }`, { allowPrivate: false }).run("on_http_request", requestInput());
    return { code: header(out, "x-error"), status: header(out, "x-status"), out };
  };

  test("127.0.0.1, ::1, 169.254.169.254, 10.0.0.1 and localhost are refused before any connection; the same loopback URL is reached with the flag", async () => {
    seen.length = 0;
    for (const url of [`${base}/secret`, `http://[::1]:${target.port}/secret`, "http://169.254.169.254/latest/meta-data/", "http://10.0.0.1/", `http://localhost:${target.port}/secret`]) {
      const r = await refused(url);
      expect({ url, code: r.code, status: r.status }).toEqual({ url, code: "HTTP_REQUEST_ADDRESS_REFUSED", status: "none" });
    }
    expect(seen).toHaveLength(0);
    const allowed = await asking(`{ url: "${base}/secret" }`).run("on_http_request", requestInput());
    expect(header(allowed, "x-status")).toBe("200");
    expect(seen).toHaveLength(1);
  });

  test("every other spelling of an inside address is refused too (decimal, hex, short, v4-mapped, unspecified, private, shared, unique-local)", async () => {
    seen.length = 0;
    const spellings = ["http://127.1/x", "http://0/x", "http://0.0.0.0/x", "http://2130706433/x", "http://0x7f000001/x", "http://[::ffff:127.0.0.1]/x", "http://[0:0:0:0:0:ffff:169.254.169.254]/x", "http://172.16.0.1/x", "http://192.168.1.1/x", "http://100.64.0.1/x", "http://[fc00::1]/x", "http://[fe80::1]/x"];
    for (const url of spellings) expect({ url, code: (await refused(url)).code }).toEqual({ url, code: "HTTP_REQUEST_ADDRESS_REFUSED" });
    expect(seen).toHaveLength(0);
  });

  test("each redirect is checked again: one allowed target sending to an inside one reaches nothing", async () => {
    const inside = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("inside") });
    const outsidePort = target.port;
    // the target stands for a public host: this one port passes the check, every other address is checked as it is
    class OnePublic extends OutgoingRequests {
      protected override destination(url: URL) {
        return url.port === String(outsidePort) ? Promise.resolve({ address: "127.0.0.1" }) : super.destination(url);
      }
    }
    try {
      const p = policyOf(
        `on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${base}/to-inside", max_redirects: 5 }\n`,
        { services: defaultServices({ httpRequests: new OnePublic({ allowPrivate: false }) }) },
      );
      redirectTo = `http://127.0.0.1:${inside.port}/stolen`;
      const out = await p.run("on_http_request", requestInput());
      expect(out.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_ADDRESS_REFUSED");
    } finally {
      redirectTo = undefined;
      inside.stop(true);
    }
  });

  test("a name that resolves to loopback (this machine's own name) is refused by its address", async () => {
    const name = hostname();
    const addresses = (await lookup(name, { all: true })).map((a) => a.address);
    // the precondition this test stands on: the name is this machine
    expect(addresses.some((a) => a.startsWith("127.") || a === "::1")).toBe(true);
    seen.length = 0;
    const r = await refused(`http://${name}:${target.port}/secret`);
    expect(r.code).toBe("HTTP_REQUEST_ADDRESS_REFUSED");
    expect(r.out.matched[0]!.actions[0]!.note).toContain("not a public address");
    expect(seen).toHaveLength(0);
  });

  test("on_error: halt answers 502 and runs nothing after; the message carries the host, not the path or query", async () => {
    const out = await asking(`{ url: "${base}/private?token=s3cret", on_error: halt }`, { allowPrivate: false }).run("on_http_request", requestInput());
    expect(answered(out)!.status).toBe(502);
    expect(out.matched).toHaveLength(1);
    expect(JSON.stringify(out.problems)).not.toContain("s3cret");
    expect(out.matched[0]!.actions[0]!.note).not.toContain("/private");
  });
});

describe("http-request: bounds", () => {
  test("a slow target hits the server's cap (1 s here, under the action's 30 s): 504 with halt, within the cap", async () => {
    const started = performance.now();
    const out = await asking(`{ url: "${base}/slow", on_error: halt, timeout: 30s }`, { timeoutMs: 1000 }).run("on_http_request", requestInput());
    const took = performance.now() - started;
    expect(answered(out)!.status).toBe(504);
    expect(out.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_TIMEOUT");
    expect(took).toBeGreaterThanOrEqual(900);
    // a liveness bound: the action's own 30 s did not apply
    expect(took).toBeLessThan(10_000);
  });

  test("the action's own timeout holds when it is shorter than the server's cap", async () => {
    const started = performance.now();
    const out = await asking(`{ url: "${base}/slow", timeout: 1s }`, { timeoutMs: 30_000 }).run("on_http_request", requestInput());
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_TIMEOUT");
    // a liveness bound: not the server's 30 s
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  test("a huge answer is not read past the cap: the request fails as too large", async () => {
    const out = await asking(`{ url: "${base}/huge" }`, { maxBytes: 4096 }).run("on_http_request", requestInput());
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_RESPONSE_TOO_LARGE");
    expect(header(out, "x-status")).toBe("none");
  });

  test("past the concurrency cap a request fails at once rather than waits", async () => {
    const shared = client({ concurrency: 1, timeoutMs: 1000 });
    const p = policyOf(
      `on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${base}/slow", on_error: halt }\n`,
      { services: defaultServices({ httpRequests: shared }) },
    );
    const first = p.run("on_http_request", requestInput());
    const started = performance.now();
    const second = await p.run("on_http_request", requestInput());
    // a liveness bound: not held until the slow service answers
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(second.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_BUSY");
    expect(answered(await first)!.status).toBe(504);
    expect(shared.inFlight).toBe(0);
  });

  test("one tunnel at its own cap gets BUSY at once; another tunnel still gets a place, and a policy run for the first (an operator's layer) counts against it", async () => {
    const shared = client({ concurrency: 4, concurrencyPerTunnel: 1, timeoutMs: 1000 });
    const asks = (url: string) => `on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${url}", on_error: halt }\n`;
    const tunnels = policyOf(asks(`${base}/slow`), { services: defaultServices({ httpRequests: shared }) });
    const operator = policyOf(asks(`${base}/`), { services: defaultServices({ httpRequests: shared }) });
    const a = requestInput({ host: "a.tunnels.example.com" });
    const held = tunnels.run("on_http_request", a);
    const started = performance.now();
    const again = await tunnels.run("on_http_request", requestInput({ host: "a.tunnels.example.com" }));
    const layer = await operator.run("on_http_request", requestInput({ host: "a.tunnels.example.com" }));
    // a liveness bound: not held until the slow service answers
    expect(performance.now() - started).toBeLessThan(5_000);
    expect(again.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_BUSY");
    expect(again.matched[0]!.actions[0]!.note).toContain("--policy-http-request-concurrency-per-tunnel");
    expect(layer.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_BUSY");
    const other = await operator.run("on_http_request", requestInput({ host: "b.tunnels.example.com" }));
    expect(other.verdict.kind).toBe("continue");
    expect(other.matched[0]!.actions[0]!.note).toContain(": 200 in");
    expect(shared.inFlight).toBe(1);
    expect(answered(await held)!.status).toBe(504);
    expect(shared.inFlight).toBe(0);
    expect(shared.tunnelsInFlight).toBe(0);
  });

  test("a tunnel's id, not its name, is what its requests count against: a renamed tunnel keeps its count", async () => {
    const shared = client({ concurrency: 4, concurrencyPerTunnel: 1, timeoutMs: 1000 });
    const p = policyOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${base}/slow", on_error: halt }\n`, { services: defaultServices({ httpRequests: shared }) });
    const as = (name: string, id: string) => {
      const input = requestInput();
      return { ...input, tunnel: { ...input.tunnel, name, id } };
    };
    const held = p.run("on_http_request", as("app", "t-1"));
    const same = await p.run("on_http_request", as("renamed", "t-1"));
    expect(same.matched[0]!.actions[0]!.note).toContain("HTTP_REQUEST_BUSY");
    expect(shared.inFlight).toBe(1);
    await held;
    expect(shared.inFlight).toBe(0);
  });

  test("one run makes at most its cap of requests (2 here): the third fails, whatever the rules ask", async () => {
    seen.length = 0;
    const rules = Array.from({ length: 3 }, () => `  - actions: [{ type: http-request, config: { url: "${base}/" } }]`).join("\n");
    const p = policyOf(`on_http_request:\n${rules}\n  - actions: [{ type: add-headers, config: { headers: { x-error: "\${actions.ngrok.http_request.error.code}" } } }]\n`, { services: services({ maxPerRun: 2 }) });
    const out = await p.run("on_http_request", requestInput());
    expect(seen).toHaveLength(2);
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_TOO_MANY");
    // the next visitor's request has its own count
    await p.run("on_http_request", requestInput());
    expect(seen).toHaveLength(4);
  });

  test("a visitor's request that came through 3 http-request actions already makes no fourth (a loop)", async () => {
    seen.length = 0;
    const out = await asking(`{ url: "${base}/" }`).run("on_http_request", requestInput({ headers: [["burrow-http-request-hops", "3"]] }));
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_LOOP");
    expect(seen).toHaveLength(0);
  });
});

describe("http-request: its config, checked at load", () => {
  const errors = (config: string, phase = "on_http_request") => errorsOf(`${phase}:\n  - actions:\n      - type: http-request\n        config: ${config}\n`).map((e) => [e.code, e.line, e.path, e.message]);

  test("a URL that is not http(s), or carries a password, is refused with its line", () => {
    expect(errors(`{ url: "ftp://files.example.com/x" }`)).toEqual([["ACTION_CONFIG", 4, "on_http_request[0].actions[0].config.url", "http-request: 'ftp://files.example.com/x': the URL must start with http:// or https://"]]);
    expect(errors(`{ url: "not a url" }`)[0]![3]).toContain("not a URL");
    expect(errors(`{ url: "https://user:pw@api.example.com/" }`)[0]![3]).toContain("must not carry a user or password");
  });

  test("ngrok's bounds: timeout 1s to 30s, max_redirects 0 to 100, 32 query parameters, 10 headers, its methods", () => {
    expect(errors(`{ url: "https://api.example.com", timeout: 31s }`)[0]![3]).toContain("from 1s to 30s");
    expect(errors(`{ url: "https://api.example.com", timeout: 500ms }`)[0]![3]).toContain("from 1s to 30s");
    expect(errors(`{ url: "https://api.example.com", max_redirects: 101 }`)).toHaveLength(1);
    expect(errors(`{ url: "https://api.example.com", method: TRACE }`)).toHaveLength(1);
    const many = Array.from({ length: 11 }, (_, i) => `h${i}: v`).join(", ");
    expect(errors(`{ url: "https://api.example.com", headers: { ${many} } }`)).toHaveLength(1);
    const params = Array.from({ length: 33 }, (_, i) => `{ key: k${i}, value: v }`).join(", ");
    expect(errors(`{ url: "https://api.example.com", query_params: [${params}] }`)).toHaveLength(1);
  });

  test("what burrow does not do is said, not ignored: a GET with a body, on_tcp_connect, the edge's own headers", () => {
    expect(errors(`{ url: "https://api.example.com", body: "x" }`)[0]![3]).toContain("a GET request has no body");
    expect(errors(`{ url: "https://api.example.com" }`, "on_tcp_connect")[0]![0]).toBe("ACTION_PHASE");
    expect(errors(`{ url: "https://api.example.com", headers: { host: x } }`)[0]![3]).toContain("set by the edge");
    expect(errors(`{ url: "https://api.example.com", headers: { Burrow-Http-Request-Hops: "0" } }`)[0]![3]).toContain("set by the edge");
  });

  test("a well-formed one loads, with ngrok's defaults", () => {
    policyOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "https://api.example.com/\${req.url.path}", retry_condition: "false", on_error: continue }\n`);
  });
});

/** A service that answers only after 40 s (released when the asker gives up): far past every bound the tests hold it to. */
function held(req: Request): Promise<Response> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(new Response("late")), 40_000);
    req.signal.addEventListener("abort", () => {
      clearTimeout(timer);
      resolve(new Response("late"));
    });
  });
}
