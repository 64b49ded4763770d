/**
 * http-request's retry_condition in the engine, sent by the edge's client
 * to a real service on loopback that fails a set number of times before it
 * answers: retried until the condition is satisfied, bounded by ngrok's 3
 * retries and the run's cap of requests (each attempt counts), all within
 * the action's one timeout; and the condition checked at load against its
 * own variables, refused with its line and column.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Outcome } from "../../src/policy/index.ts";
import { asking, header, loopbackServices } from "./http-request-harness.ts";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";

let target: ReturnType<typeof Bun.serve>;
let base: string;
/** Requests each path got. */
const hits = new Map<string, number>();
/** A port nothing listens on (a service that is down). */
let closedPort: number;

beforeAll(() => {
  target = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const n = (hits.get(url.pathname) ?? 0) + 1;
      hits.set(url.pathname, n);
      // /flaky/<k>/<id>: 503 for the first k requests, then 200
      const flaky = /^\/flaky\/(\d+)\//.exec(url.pathname);
      if (flaky) return n > Number(flaky[1]) ? Response.json({ ok: true, after: n }) : new Response("down", { status: 503 });
      if (url.pathname.startsWith("/slow-down/")) return new Promise((resolve) => setTimeout(() => resolve(new Response("down", { status: 503 })), 600));
      return new Response("down", { status: 503 });
    },
  });
  base = `http://127.0.0.1:${target.port}`;
  const gone = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
  closedPort = gone.port!;
  gone.stop(true);
});

afterAll(() => target?.stop(true));

const services = loopbackServices;

const note = (out: Outcome) => out.matched[0]!.actions[0]!.note ?? "";
let unique = 0;
const path = (prefix: string) => `${prefix}/${++unique}`;

describe("http-request retry_condition: attempts until it is satisfied", () => {
  test("a service that fails twice (503) then answers is retried until its 200; each attempt's answer is in attempts", async () => {
    const at = path("/flaky/2");
    const out = await asking(`{ url: "${base}${at}", retry_condition: "last_attempt.res.status_code >= 500" }`).run("on_http_request", requestInput());
    expect(hits.get(at)).toBe(3);
    expect(header(out, "x-status")).toBe("200");
    expect(header(out, "x-attempts")).toBe("3");
    expect(note(out)).toMatch(/: 200 in \d+ ms \(3 attempts\)$/);
  });

  test("attempts counts them: `attempts < 2` makes exactly two, the second's answer stands", async () => {
    const at = path("/flaky/5");
    const out = await asking(`{ url: "${base}${at}", retry_condition: "attempts < 2" }`).run("on_http_request", requestInput());
    expect(hits.get(at)).toBe(2);
    expect(header(out, "x-status")).toBe("503");
  });

  test("a condition that is never satisfied stops at ngrok's 3 retries: 4 attempts, the last answer is the result", async () => {
    const at = path("/down");
    const out = await asking(`{ url: "${base}${at}", retry_condition: "true" }`).run("on_http_request", requestInput());
    expect(hits.get(at)).toBe(4);
    expect(header(out, "x-status")).toBe("503");
    expect(header(out, "x-attempts")).toBe("4");
  });

  test("an attempt with no answer is told in last_attempt.error; a connection that fails is retried on it, and fails in the end", async () => {
    const out = await asking(`{ url: "http://127.0.0.1:${closedPort}/x", retry_condition: "last_attempt.error.startsWith('HTTP_REQUEST_FAILED')" }`).run("on_http_request", requestInput());
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_FAILED");
    expect(note(out)).toContain("(4 attempts)");
  });

  test("a condition that reads the answer of an attempt that got none asks for no retry, and the run says why", async () => {
    const out = await asking(`{ url: "http://127.0.0.1:${closedPort}/x", retry_condition: "last_attempt.res.status_code >= 500" }`).run("on_http_request", requestInput());
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_FAILED");
    expect(note(out)).not.toContain("attempts");
    expect(JSON.stringify(out.problems)).toContain("retry_condition");
    // the way to ask: whether it got one
    const guarded = await asking(`{ url: "http://127.0.0.1:${closedPort}/x", retry_condition: "!has(last_attempt.res.status_code) || last_attempt.res.status_code >= 500" }`).run("on_http_request", requestInput());
    expect(note(guarded)).toContain("(4 attempts)");
  });

  test("the action's timeout covers every attempt: a slow failing service (600 ms) under timeout 1s gets at most two", async () => {
    const at = path("/slow-down");
    const started = performance.now();
    const out = await asking(`{ url: "${base}${at}", timeout: 1s, retry_condition: "true" }`).run("on_http_request", requestInput());
    // the attempts' count says the timeout held; the time only that nothing hung
    expect(performance.now() - started).toBeLessThan(10_000);
    expect(hits.get(at)).toBeLessThanOrEqual(2);
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_TIMEOUT");
  });

  test("without retry_condition, or with ngrok's default `false`, one attempt", async () => {
    for (const extra of ["", `, retry_condition: "false"`]) {
      const at = path("/down");
      await asking(`{ url: "${base}${at}"${extra} }`).run("on_http_request", requestInput());
      expect(hits.get(at)).toBe(1);
    }
  });
});

describe("http-request retry_condition: the run's cap of requests counts every attempt", () => {
  test("with a cap of 3, a condition that never stops makes 3 attempts, and the next http-request of the run makes none", async () => {
    const first = path("/down");
    const second = path("/down");
    const p = policyOf(
      `
on_http_request:
  - actions:
      - type: http-request
        config: { url: "${base}${first}", retry_condition: "true" }
  - actions:
      - type: http-request
        config: { url: "${base}${second}" }
  - actions:
      - type: add-headers
        config: { headers: { x-error: "\${actions.ngrok.http_request.error.code}" } }
`,
      { services: services({ maxPerRun: 3 }) },
    );
    const out = await p.run("on_http_request", requestInput());
    expect(hits.get(first)).toBe(3);
    expect(note(out)).toContain("(3 attempts, the run's cap of requests stopped another)");
    expect(hits.get(second)).toBeUndefined();
    expect(header(out, "x-error")).toBe("HTTP_REQUEST_TOO_MANY");
  });
});

describe("http-request retry_condition: the run's evaluation budget", () => {
  test("each evaluation spends the run's budget: a condition of some 80 units (a 40-entry list and 40 loop steps) under a limit of 100 allows one retry, not the three it asks for, and the run then ends over budget (500)", async () => {
    const at = path("/down");
    const p = policyOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "${base}${at}", retry_condition: "lists.range(40).all(x, x >= 0)" }\n`, {
      services: loopbackServices(),
      limits: { costLimit: 100 },
    });
    const out = await p.run("on_http_request", requestInput());
    expect(hits.get(at)).toBe(2);
    expect(out.verdict.kind === "respond" && out.verdict.response.status).toBe(500);
    expect(out.problems.map((x) => x.code)).toContain("COST_EXCEEDED");
  });
});

describe("http-request retry_condition: checked at load against its own variables", () => {
  const errors = (condition: string) =>
    errorsOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config:\n          url: "https://api.example.com/"\n          retry_condition: "${condition}"\n`);

  test("one that does not compile is refused with its line and column: a syntax error, a type error, a field the answer has not", () => {
    const syntax = errors("attempts <");
    expect(syntax).toHaveLength(1);
    expect(syntax[0]).toMatchObject({ code: "CEL_SYNTAX", line: 6, path: "on_http_request[0].actions[0].config.retry_condition" });
    expect(syntax[0]!.column).toBeGreaterThan(28);
    const typed = errors("attempts < 'three'");
    expect(typed[0]).toMatchObject({ code: "CEL_TYPE", line: 6, column: 37, expressionColumn: 9 });
    const field = errors("last_attempt.res.status >= 500");
    expect(field[0]).toMatchObject({ code: "CEL_TYPE", line: 6, expressionColumn: 17 });
    expect(field[0]!.message).toContain("its fields are status_code, header, body, resolved_ip, time_ms");
    expect(errors("attempts")[0]!.message).toContain("must be true or false");
  });

  test("it reads the attempts, not the visitor's request: `req.method` is refused there", () => {
    const e = errors("req.method == 'GET'");
    expect(e).toHaveLength(1);
    expect(e[0]!.message).toContain("req.method is not available in an http-request's retry_condition");
    expect(e[0]!.line).toBe(6);
  });

  test("ngrok's names load: attempts, last_attempt.req, last_attempt.res, last_attempt.error", () => {
    const loads = (condition: string) => policyOf(`on_http_request:\n  - actions:\n      - type: http-request\n        config: { url: "https://api.example.com/", retry_condition: "${condition}" }\n`);
    loads("attempts < 3 && (last_attempt.error != '' || last_attempt.res.status_code == 503) && last_attempt.req.method == 'GET'");
    loads("has(last_attempt.res.header) && last_attempt.req.url.startsWith('https:') && size(last_attempt.res.body) < 10");
  });
});
