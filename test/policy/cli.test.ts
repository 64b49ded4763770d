/**
 * `burrow policy check` and `burrow policy test`, run as the program (the
 * harness runs `bun src/main.ts`, or the built executable): exit codes,
 * the errors with their lines and columns, what a test run prints, --json.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compiledBurrow } from "../harness/compiled.ts";
import { runBurrow } from "../harness/run.ts";

const dir = mkdtempSync(join(tmpdir(), "policy-cli-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = (name: string, text: string) => {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
};

const good = file(
  "good.yml",
  `on_http_request:
  - name: no deletes
    expressions: ["req.method == 'DELETE'"]
    actions:
      - type: deny
        config: { status_code: 405 }
  - name: tag
    actions:
      - type: add-headers
        config: { headers: { x-client-ip: "\${conn.client_ip}" } }
      - type: log
        config: { metadata: { path: "\${req.url.path}" } }
on_http_response:
  - actions:
      - type: compress-response
`,
);

const bad = file(
  "bad.yml",
  `on_http_request:
  - name: api
    expressions:
      - req.method == 'GET' && req.nope
    actions:
      - type: forward-internal
`,
);

describe("burrow policy check", () => {
  test("a good policy: exit 0, ok and its rules per phase", async () => {
    const out = await runBurrow(["policy", "check", good]);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe(`${good}: ok, 0 rules on_tcp_connect, 2 rules on_http_request, 1 rule on_http_response, 0 rules on_event_stream_message\n`);
  });

  test("a bad one: exit 1, each error as FILE:LINE:COLUMN with its rule and code, the expression with a caret", async () => {
    const out = await runBurrow(["policy", "check", bad]);
    expect(out.code).toBe(1);
    expect(out.stderr).toBe(
      `${bad}:4:35: undeclared reference to 'req.nope' (req's variables are req.method, req.version, req.url, req.url.scheme, req.url.host, req.url.port, ...) (rule api) [CEL_TYPE]\n` +
        "    req.method == 'GET' && req.nope\n" +
        `    ${" ".repeat(26)}^\n` +
        `${bad}:6:15: burrow has no action 'forward-internal': burrow has no internal endpoints: a tunnel forwards to its agent (it has add-headers, basic-auth, circuit-breaker, close-connection, compress-response, custom-response, deny, http-request, jwt-validation, log, openid-connect, rate-limit, redirect, remove-headers, request-body-find-replace, response-body-find-replace, restrict-ips, set-vars, sse-find-replace, url-rewrite, verify-webhook) (rule api) [ACTION_UNKNOWN]\n`,
    );
  });

  test("--json: the same as data", async () => {
    const ok = await runBurrow(["policy", "check", "--json", good]);
    expect(JSON.parse(ok.stdout)).toEqual({ ok: true, rules: { on_tcp_connect: 0, on_http_request: 2, on_http_response: 1, on_event_stream_message: 0 } });
    const no = await runBurrow(["policy", "check", bad, "--json"]);
    expect(no.code).toBe(1);
    const parsed = JSON.parse(no.stdout) as { ok: boolean; errors: { code: string; line: number; column: number; expressionColumn?: number }[] };
    expect(parsed.ok).toBe(false);
    expect(parsed.errors.map((e) => [e.code, e.line, e.column, e.expressionColumn])).toEqual([
      ["CEL_TYPE", 4, 35, 27],
      ["ACTION_UNKNOWN", 6, 15, undefined],
    ]);
  });

  test("mistakes on the command line: exit 2 with one line", async () => {
    for (const args of [["policy", "check"], ["policy", "check", join(dir, "missing.yml")], ["policy", "frobnicate"], ["policy", "check", good, "extra"]]) {
      const out = await runBurrow(args);
      expect(out.code).toBe(2);
      expect(out.stderr.trim().split("\n")).toHaveLength(1);
    }
  });
});

describe("burrow policy test", () => {
  test("a request a rule answers: the rule, its action, and the answer", async () => {
    const out = await runBurrow(["policy", "test", good, "--request", "DELETE /things/1"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe("on_http_request\n  rule no deletes matched\n    deny: responded (denied with 405)\n=> the edge would answer 405 (rule no deletes, deny)\n");
  });

  test("a request that goes on: what matched, the log, and the request the service would get", async () => {
    const out = await runBurrow(["policy", "test", good, "--request", "GET /a?b=1", "--header", "Accept: text/html", "--client-ip", "198.51.100.9", "--host", "shop.tunnels.example.com"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toBe(
      "on_http_request\n" +
        "  rule tag matched\n" +
        "    add-headers: continued (added x-client-ip)\n" +
        "    log: continued (logged)\n" +
        '  log: {"path":"/a"}\n' +
        "=> the edge would forward GET /a?b=1 to the service\n" +
        "   Host: shop.tunnels.example.com\n" +
        "   Accept: text/html\n" +
        "   x-client-ip: 198.51.100.9\n",
    );
  });

  test("an answer's body is printed after a margin, line by line", async () => {
    const path = file("body.yml", 'on_http_request:\n  - actions:\n      - type: custom-response\n        config: { status_code: 503, body: "down\\nback soon\\n" }\n');
    const out = await runBurrow(["policy", "test", path, "--request", "GET /"]);
    expect(out.stdout).toEndWith("=> the edge would answer 503 (rule #1, custom-response)\n   content-type: text/plain; charset=utf-8\n   | down\n   | back soon\n");
  });

  test("--status runs on_http_response on the service's made-up answer", async () => {
    const out = await runBurrow(["policy", "test", good, "--request", "GET /", "--header", "Accept-Encoding: br", "--status", "200", "--response-header", "Content-Type: text/html"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("on_http_response\n  rule #1 matched\n    compress-response: continued (compressed with br)\n=> the edge would send the service's 200, compressed with br\n   Content-Type: text/html\n   content-encoding: br\n");
  });

  test("on_event_stream_message: check counts its rules; --status with an event stream runs it on the response's head", async () => {
    const path = file("events.yml", "on_event_stream_message:\n  - name: redact\n    actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: 'sk-\\w+', to: '[key]' }, { field: retry, from: '\\d+', to: '5000' }] }\n");
    expect((await runBurrow(["policy", "check", path])).stdout).toBe(`${path}: ok, 0 rules on_tcp_connect, 0 rules on_http_request, 0 rules on_http_response, 1 rule on_event_stream_message\n`);
    const out = await runBurrow(["policy", "test", path, "--request", "GET /events", "--status", "200", "--response-header", "Content-Type: text/event-stream"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toEndWith("on_event_stream_message\n  rule redact matched\n    sse-find-replace: continued (2 replacements for each event)\n=> the edge would rewrite each event of the stream by 2 replacements\n");
    const plain = await runBurrow(["policy", "test", path, "--request", "GET /", "--status", "200", "--response-header", "Content-Type: text/html"]);
    expect(plain.stdout).toEndWith("=> the edge would send the stream's events as they come\n");
  });

  test("--event: each event through on_event_stream_message's rewrites, printed as the visitor would get it", async () => {
    const path = file("events-given.yml", "on_event_stream_message:\n  - name: redact\n    actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: 'sk-(\\w+)', to: '[key $1]' }, { field: retry, from: '\\d+', to: '5000' }] }\n");
    const out = await runBurrow(["policy", "test", path, "--request", "GET /events", "--status", "200", "--event", "data: my sk-abc key\\nid: 7", "--event", "retry: 100", "--event", ": a comment"]);
    expect(out.code).toBe(0);
    // no Content-Type said: the answer is an event stream
    expect(out.stdout).toContain("=> the edge would send the service's 200\n   Content-Type: text/event-stream\n");
    expect(out.stdout).toEndWith(
      "=> the edge would rewrite each event of the stream by 2 replacements\n" +
        "event 1\n   | data: my sk-abc key\n   | id: 7\n=> sent as\n   | data: my [key abc] key\n   | id: 7\n" +
        "event 2\n   | retry: 100\n=> sent as\n   | retry: 5000\n" +
        "event 3\n   | : a comment\n=> sent as it came\n",
    );
    const json = JSON.parse((await runBurrow(["policy", "test", path, "--request", "GET /events", "--status", "200", "--event", "data: sk-x", "--json"])).stdout) as { phase: string; events?: unknown }[];
    expect(json.at(-1)).toMatchObject({ phase: "on_event_stream_message", events: [{ event: "data: sk-x\n\n", result: "rewritten", sent: "data: [key x]\n\n" }] });
  });

  test("--event: a rewrite past an event's growth cap cuts the stream there; a policy without the phase sends events as they came; without --status, exit 2", async () => {
    const growing = file("events-growing.yml", `on_event_stream_message:\n  - actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: 'a', to: '${"b".repeat(200)}' }] }\n`);
    const cut = await runBurrow(["policy", "test", growing, "--request", "GET /", "--status", "200", "--event", `data: ${"a".repeat(1000)}`, "--json"]);
    expect(cut.code).toBe(0);
    const events = (JSON.parse(cut.stdout) as { events?: { result: string; why?: string }[] }[]).at(-1)!.events!;
    expect(events[0]!.result).toBe("cut");
    expect(events[0]!.why).toMatch(/grow/);
    const none = await runBurrow(["policy", "test", good, "--request", "GET /", "--status", "200", "--event", "data: sk-1"]);
    expect(none.stdout).toEndWith("on_event_stream_message\n  no rule matched\n=> the edge would send the stream's events as they come\nevent 1\n   | data: sk-1\n=> sent as it came\n");
    const alone = await runBurrow(["policy", "test", good, "--request", "GET /", "--event", "data: x"]);
    expect(alone.code).toBe(2);
    expect(alone.stderr).toContain("--event goes with --status");
  });

  test("--json", async () => {
    const out = await runBurrow(["policy", "test", good, "--request", "DELETE /x", "--json"]);
    const steps = JSON.parse(out.stdout) as { phase: string; verdict: { kind: string; status?: number } }[];
    expect(steps.map((s) => [s.phase, s.verdict.kind, s.verdict.status])).toEqual([
      ["on_tcp_connect", "continue", undefined],
      ["on_http_request", "respond", 405],
    ]);
  });

  test("a policy that does not load: exit 1 with its errors; a bad --request or --header: exit 2", async () => {
    const out = await runBurrow(["policy", "test", bad, "--request", "GET /"]);
    expect(out.code).toBe(1);
    expect(out.stderr).toContain("[ACTION_UNKNOWN]");
    for (const args of [["--request", "nonsense"], ["--request", "GET /", "--header", "no colon"], [], ["--request", "GET /", "--status", "2000"]]) {
      const usage = await runBurrow(["policy", "test", good, ...args]);
      expect(usage.code).toBe(2);
    }
  });
});

describe("the compiled executable", () => {
  test("checks and tries a policy as the source does (CEL, the RE2 patterns' VM and all, bundled)", async () => {
    const exe = await compiledBurrow();
    const policy = file("compiled.yml", 'on_http_request:\n  - expressions: ["req.url.path.matches(\'^/a/\')"]\n    actions:\n      - type: redirect\n        config: { from: "/a/(.*)", to: "/b/$1" }\n');
    const run = async (args: string[]) => {
      const proc = Bun.spawn([exe, ...args], { stdout: "pipe", stderr: "pipe" });
      const [stdout, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
      return { stdout, code };
    };
    expect(await run(["policy", "check", policy])).toEqual({ code: 0, stdout: `${policy}: ok, 0 rules on_tcp_connect, 1 rule on_http_request, 0 rules on_http_response, 0 rules on_event_stream_message\n` });
    const tried = await run(["policy", "test", policy, "--request", "GET /a/x?y=1"]);
    expect(tried.code).toBe(0);
    expect(tried.stdout).toContain("   location: https://app.tunnels.example.com/b/x?y=1\n");
  }, 120_000);
});
