/**
 * http-request through the real server and agent, with curl, to a real
 * service on loopback standing for the API a policy asks. Loopback is an
 * inside address: a server run as it ships (no flag) refuses every
 * request of a tunnel's policy to it (127.0.0.1, ::1, this machine's name,
 * the admin API) and to 169.254.169.254, and the service sees nothing;
 * the successful requests are made by a server run with
 * --policy-http-request-allow-private on, the operator's switch, which is
 * what lets the same loopback service be reached. The bounds are the
 * server's flags, tested small: a slow service, a huge answer.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { hostname } from "node:os";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer } from "../harness/server.ts";
import { withServer } from "../harness/tunnel.ts";
import { waitUntil } from "../harness/wait.ts";
import { withPolicy, type Echoed } from "./rig.ts";

let api: ReturnType<typeof Bun.serve>;
/** What the API was asked: path and query, and the x-user it was sent. */
const asked: { path: string; user: string | null }[] = [];

beforeAll(() => {
  api = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch(req) {
      const url = new URL(req.url);
      const user = req.headers.get("x-user");
      asked.push({ path: url.pathname + url.search, user });
      if (url.pathname === "/slow") return held(req);
      if (url.pathname === "/huge") return new Response("x".repeat(1024 * 1024));
      if (url.pathname === "/check") return Response.json({ allowed: user === "ada", role: user === "ada" ? "admin" : "none" });
      return new Response("inside");
    },
  });
});

afterAll(() => api?.stop(true));

const at = (path: string) => `http://127.0.0.1:${api.port}${path}`;

/** A rule for `path` whose http-request goes to `url`; halt, or continue and answer with the error's code. */
function rule(path: string, url: string, halt: boolean): string {
  const tell = halt ? "" : `\n      - type: custom-response\n        config: { status_code: 200, body: "\${actions.ngrok.http_request.error.code}" }`;
  return `  - expressions: ["req.url.path == '${path}'"]
    actions:
      - type: http-request
        config: { url: "${url}", on_error: ${halt ? "halt" : "continue"}, timeout: 30s }${tell}
`;
}

describe("a server as it ships: a tunnel's policy reaches nothing inside", () => {
  test("127.0.0.1, ::1, 169.254.169.254, this machine's name and the admin API are refused (halt: 502; continue: the code told); the service is never asked", async () => {
    await using server = await startServer();
    const policy = `on_http_request:
${rule("/v4", at("/secret"), true)}${rule("/v6", `http://[::1]:${api.port}/secret`, true)}${rule("/metadata", "http://169.254.169.254/latest/meta-data/", true)}${rule("/name", `http://${hostname()}:${api.port}/secret`, true)}${rule("/admin", `${server.adminUrl}/api/users`, true)}${rule("/told", at("/secret"), false)}`;
    await using t = await withPolicy(policy, { server });
    asked.length = 0;
    for (const path of ["/v4", "/v6", "/metadata", "/name", "/admin"]) {
      const r = await t.curl(path);
      expect({ path, status: r.status }).toEqual({ path, status: 502 });
      expect(r.headers["x-from-service"]).toBeUndefined();
    }
    const told = await t.curl("/told");
    expect(told.status).toBe(200);
    expect(told.body).toBe("HTTP_REQUEST_ADDRESS_REFUSED");
    expect(asked).toEqual([]);
  });

  test("a URL that is not one is refused at the handshake, with its line", async () => {
    await using rig = await withServer();
    const policy = `on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "file:///etc/passwd" }\n`;
    const r = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: jsonPayload({ version: PROTOCOL_VERSION, token: rig.token, tunnels: [{ protocol: "http", policy }] }) });
    expect(r.refusal?.code).toBe("POLICY_INVALID");
    expect(r.refusal?.message).toContain("policy:4:");
    expect(r.refusal?.message).toContain("the URL must start with http:// or https://");
  });
});

describe("with --policy-http-request-allow-private on (and the bounds small)", () => {
  const SERVER = { args: ["--policy-http-request-allow-private", "on", "--policy-http-request-timeout", "1", "--policy-http-request-max-bytes", "4096"] };

  test("the policy asks the service, and its answer decides: refused, or let through with what it said; on_http_response asks too; on HTTP/1.1 and HTTP/2", async () => {
    await using t = await withPolicy(
      `
on_http_request:
  - actions:
      - type: http-request
        config:
          url: "${at("/check")}"
          query_params: [{ key: path, value: "\${req.url.path}" }]
          headers: { x-user: "\${'x-user' in req.headers ? req.headers['x-user'][0] : 'nobody'}" }
          on_error: halt
  - expressions: ["json.decode(actions.ngrok.http_request.res.body).allowed != true"]
    actions: [{ type: custom-response, config: { status_code: 403, body: "refused by the check" } }]
  - actions:
      - type: add-headers
        config: { headers: { x-role: "\${json.decode(actions.ngrok.http_request.res.body).role}" } }
on_http_response:
  - actions:
      - type: http-request
        config: { url: "${at("/audit")}", query_params: [{ key: status, value: "\${string(res.status_code)}" }] }
      - type: add-headers
        config: { headers: { x-audited: "\${string(actions.ngrok.http_request.res.status_code)}" } }
`,
      { server: SERVER },
    );
    asked.length = 0;
    const refused = await t.curl("/app", ["-H", "x-user: eve"]);
    expect(refused.status).toBe(403);
    expect(refused.body).toBe("refused by the check");
    const let_ = await t.curl("/app", ["-H", "x-user: ada"]);
    expect(let_.status).toBe(200);
    expect((JSON.parse(let_.body) as Echoed).headers["x-role"]).toBe("admin");
    expect(let_.headers["x-audited"]).toBe("200");
    expect(asked).toEqual([
      { path: "/check?path=%2Fapp", user: "eve" },
      { path: "/check?path=%2Fapp", user: "ada" },
      { path: "/audit?status=200", user: null },
    ]);
    // the same on HTTP/2 streams (h2c): each phase waits on the action as on HTTP/1.1
    asked.length = 0;
    const h2Refused = await t.curl("/app", ["--http2-prior-knowledge", "-H", "x-user: eve"]);
    expect(h2Refused.status).toBe(403);
    const h2 = await t.curl("/app", ["--http2-prior-knowledge", "-H", "x-user: ada"]);
    expect(h2.status).toBe(200);
    expect((JSON.parse(h2.body) as Echoed).headers["x-role"]).toBe("admin");
    expect(h2.headers["x-audited"]).toBe("200");
    expect(asked.map((a) => a.path)).toEqual(["/check?path=%2Fapp", "/check?path=%2Fapp", "/audit?status=200"]);
  });

  test("a slow service hits --policy-http-request-timeout (1 s, under the action's 30 s): 504, not a hang; a huge answer is not read past --policy-http-request-max-bytes", async () => {
    await using t = await withPolicy(`on_http_request:\n${rule("/slow", at("/slow"), true)}${rule("/huge", at("/huge"), false)}`, { server: SERVER });
    const started = performance.now();
    const slow = await t.curl("/slow");
    expect(slow.status).toBe(504);
    // a liveness bound: the action's own 30 s did not apply
    expect(performance.now() - started).toBeLessThan(10_000);
    const huge = await t.curl("/huge");
    expect(huge.status).toBe(200);
    expect(huge.body).toBe("HTTP_REQUEST_RESPONSE_TOO_LARGE");
  });
});

describe("--policy-http-request-concurrency-per-tunnel", () => {
  test("at 1: while a tunnel's policy request waits, that tunnel's next fails at once with HTTP_REQUEST_BUSY and asks nothing; another tunnel still gets its place; the place comes back when the first ends", async () => {
    await using server = await startServer({ args: ["--policy-http-request-allow-private", "on", "--policy-http-request-timeout", "3", "--policy-http-request-concurrency-per-tunnel", "1"] });
    const policy = `on_http_request:\n${rule("/slow", at("/slow"), true)}${rule("/told", at("/told"), false)}${rule("/ok", at("/ok"), true)}`;
    await using a = await withPolicy(policy, { server, username: "busy-a" });
    await using b = await withPolicy(policy, { server, username: "busy-b" });
    asked.length = 0;
    const first = a.curl("/slow");
    await waitUntil(() => asked.some((x) => x.path === "/slow"), 15_000, "the first policy request at the service");
    const busy = await a.curl("/told");
    expect(busy.status).toBe(200);
    expect(busy.body).toBe("HTTP_REQUEST_BUSY");
    const other = await b.curl("/ok");
    expect(other.status).toBe(200);
    expect(other.headers["x-from-service"]).toBeDefined();
    expect(asked.map((x) => x.path)).toEqual(["/slow", "/ok"]);
    // the first waited out --policy-http-request-timeout: 504, and its place is free again
    expect((await first).status).toBe(504);
    const again = await a.curl("/ok");
    expect(again.status).toBe(200);
    expect(again.headers["x-from-service"]).toBeDefined();
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
