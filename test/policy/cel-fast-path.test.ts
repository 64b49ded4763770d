/**
 * The compiled fast path of the common expression shapes (src/policy/cel/
 * fast.ts) against @bufbuild/cel's evaluation of the same expressions:
 * expressions generated from those shapes (and from others next to them,
 * which must fall back to CEL), each evaluated on generated requests both
 * ways. Wherever the fast path answers, its answer is CEL's; where CEL
 * ends in an error, the fast path gives no answer and the expression's
 * evaluation is CEL's, error and words included. And a phase's conditions
 * written as one function (src/policy/phase-matcher.ts): generated
 * policies run on generated requests match the rules, and tell the
 * problems, that each expression evaluated by CEL alone says.
 */
import { describe, expect, test } from "bun:test";
import { isCelError } from "@bufbuild/cel";
import fc from "fast-check";
import { compileExpression, type CompiledExpression } from "../../src/policy/cel/compile.ts";
import { Bindings } from "../../src/policy/context.ts";
import { DEFAULT_POLICY_LIMITS } from "../../src/policy/limits.ts";
import { WorkingRequest, WorkingResponse } from "../../src/policy/message.ts";
import type { Phase } from "../../src/policy/variables.ts";
import { policyOf, requestInput } from "./policy-harness.ts";

const quote = (s: string) => `'${s.replace(/\\/g, "\\\\").replace(/'/g, "\\'")}'`;

// values requests are made of, and literals drawn from the same pools (so comparisons are often true)
const METHODS = ["GET", "HEAD", "POST", "get", "DELETE"];
const PATHS = ["/", "/admin", "/admin/x", "/old", "/healthz", "/a.bin", "/files/1k.bin", "/ä", "/%20"];
const QUERIES = ["", "a=1", "a=1&a=2&b=", "b=%C3%A4", "x"];
const HEADER_NAMES = ["x-api-key", "X-Api-Key", "user-agent", "cookie", "accept", "x-empty", "\u212Aey", "key"];
const HEADER_VALUES = ["revoked", "ok", "", "BadBot/1.0", "Mozilla BadBot", "a=b; c=d", "\u00e9t\u00e9"];
const IPS = ["127.0.0.1", "10.1.2.3", "192.168.0.9", "::1", "2001:db8::5", "::ffff:10.0.0.7", "not-an-ip"];
const RANGES = ["10.0.0.0/8", "127.0.0.1", "2001:db8::/32", "::ffff:10.0.0.0/104", "192.168.0.0/16", "bogus", "0.0.0.0/0"];
const STRINGS = [...METHODS, ...PATHS, ...HEADER_VALUES, ...IPS, "a", "1", "", "http", "https", "/a", ".bin", "Bot", "\u212A"];
const INTS = ["0", "1", "80", "443", "-1", "50000", "8080"];

const STRING_VARS = ["req.method", "req.url.path", "req.url.query", "req.host", "req.url.host", "req.url.scheme", "req.user_agent", "req.content_type", "conn.client_ip", "tunnel.name", "endpoint.host", "visitor.identity", "req.url.uri"];
const INT_VARS = ["conn.client_port", "req.url.port", "req.content_length", "conn.server_port", "endpoint.port"];

// and parts of them: what startsWith, endsWith and contains tell apart
const PARTS = [...new Set(STRINGS.flatMap((v) => [v.slice(0, 2), v.slice(-3), v.slice(1, 4)]))];
const stringLit = fc.oneof(fc.constantFrom(...STRINGS), fc.constantFrom(...PARTS)).map(quote);
const intLit = fc.constantFrom(...INTS);
const headerIndex = fc.tuple(fc.constantFrom(...HEADER_NAMES), fc.constantFrom("0", "1", "2")).map(([n, i]) => `req.headers[${quote(n)}][${i}]`);
const queryIndex = fc.tuple(fc.constantFrom("a", "b", "x", "z"), fc.constantFrom("0", "1")).map(([n, i]) => `req.query_params[${quote(n)}][${i}]`);
const stringTerm = fc.oneof({ weight: 4, arbitrary: fc.constantFrom(...STRING_VARS) }, { weight: 1, arbitrary: headerIndex }, { weight: 1, arbitrary: queryIndex });
const intTerm = fc.constantFrom(...INT_VARS);

/** A bool expression of the fast shapes, or of shapes next to them (size(), a mix of types) that CEL alone evaluates. */
const condition: fc.Arbitrary<string> = fc.letrec<{ cond: string }>((tie) => ({
  cond: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    fc.tuple(stringTerm, fc.constantFrom("==", "!=", "<", ">="), fc.oneof(stringLit, stringTerm)).map(([a, op, b]) => `${a} ${op} ${b}`),
    fc.tuple(intTerm, fc.constantFrom("==", "!=", "<", "<=", ">", ">="), fc.oneof(intLit, intTerm)).map(([a, op, b]) => `${a} ${op} ${b}`),
    fc.tuple(stringTerm, fc.constantFrom("startsWith", "endsWith", "contains"), fc.oneof(stringLit, stringTerm)).map(([a, m, b]) => `${a}.${m}(${b})`),
    fc.tuple(stringTerm, fc.array(stringLit, { minLength: 1, maxLength: 4 })).map(([a, list]) => `${a} in [${list.join(", ")}]`),
    fc.tuple(intTerm, fc.array(intLit, { minLength: 1, maxLength: 3 })).map(([a, list]) => `${a} in [${list.join(", ")}]`),
    fc.constantFrom(...HEADER_NAMES).map((n) => `${quote(n)} in req.headers`),
    fc.constantFrom("a", "b", "z").map((n) => `${quote(n)} in req.query_params`),
    fc.constantFrom(...HEADER_NAMES).map((n) => `hasReqHeader(${quote(n)})`),
    fc.tuple(fc.oneof(fc.constant("conn.client_ip"), stringTerm), fc.constantFrom(...RANGES)).map(([ip, r]) => `inCidrRange(${ip}, ${quote(r)})`),
    fc.tuple(fc.constant("conn.client_ip"), fc.array(fc.constantFrom(...RANGES), { minLength: 1, maxLength: 3 })).map(([ip, rs]) => `inCidrRanges(${ip}, [${rs.map(quote).join(", ")}])`),
    // next to the fast shapes: CEL's alone
    fc.tuple(stringTerm, intLit).map(([a, n]) => `size(${a}) > ${n}`),
    fc.tuple(stringTerm, stringLit).map(([a, b]) => `${a} + 'x' == ${b}`),
    fc.tuple(intTerm).map(([a]) => `${a} == 443.0`),
    fc.constantFrom("true", "false"),
    tie("cond").map((c) => `!(${c})`),
    fc.tuple(tie("cond"), fc.constantFrom("&&", "||"), tie("cond")).map(([a, op, b]) => `(${a}) ${op} (${b})`),
  ),
})).cond;

const request = fc.record({
  method: fc.constantFrom(...METHODS),
  path: fc.constantFrom(...PATHS),
  query: fc.constantFrom(...QUERIES),
  headers: fc.array(fc.tuple(fc.constantFrom(...HEADER_NAMES.filter((n) => /^[\x21-\x7e]+$/.test(n)), "Content-Type", "Content-Length"), fc.constantFrom(...HEADER_VALUES, "text/html; charset=utf-8", "12", "x")), { maxLength: 6 }),
  clientIp: fc.constantFrom(...IPS),
  host: fc.constantFrom("app.example.com", "app.example.com:8443", "[::1]:80", "app.example.com:notaport"),
  scheme: fc.constantFrom("http" as const, "https" as const),
});

type Req = typeof request extends fc.Arbitrary<infer R> ? R : never;

function bindingsOf(r: Req, phase: Phase): Bindings {
  const input = requestInput({ method: r.method, target: r.query ? `${r.path}?${r.query}` : r.path, headers: r.headers, clientIp: r.clientIp, host: r.host, scheme: r.scheme });
  const now = input.now!;
  const response = phase === "on_http_response" ? new WorkingResponse({ status: 200, headers: [["Content-Type", "text/plain"]] }) : undefined;
  return new Bindings(input, DEFAULT_POLICY_LIMITS, new WorkingRequest(input.request!, now), response);
}

/** CEL's result and the expression's (fast path first), compared, each on its own run's state (nothing one made is read by another); what the fast path answered. */
function compare(e: CompiledExpression, made: () => Bindings): "fast" | "cel" {
  const fast = e.fast?.(made());
  const either = e.evaluate(made());
  const byCel = e.evaluateByCel(made());
  if (isCelError(byCel)) {
    // CEL ends in an error: the fast path has no answer, and the evaluation is CEL's own
    expect(fast).toBeUndefined();
    expect(isCelError(either) && either.message).toBe(byCel.message);
    return "cel";
  }
  expect(either).toEqual(byCel);
  if (fast === undefined) return "cel";
  expect(fast).toEqual(byCel);
  return "fast";
}

describe("the fast path gives CEL's answers", () => {
  test("on generated expressions and requests, in both HTTP phases", () => {
    const seen = { expressions: 0, withFast: 0, fastAnswers: 0, celAnswers: 0, trueAnswers: 0 };
    fc.assert(
      fc.property(condition, fc.array(request, { minLength: 8, maxLength: 8 }), fc.constantFrom<Phase>("on_http_request", "on_http_response"), (text, requests, phase) => {
        const e = compileExpression(text, phase, "condition", DEFAULT_POLICY_LIMITS);
        if ("kind" in e) return; // refused at load (a type mix CEL's checker refuses): nothing to evaluate
        seen.expressions++;
        if (e.fast) seen.withFast++;
        for (const r of requests) {
          const made = () => bindingsOf(r, phase);
          if (compare(e, made) === "fast") seen.fastAnswers++;
          else seen.celAnswers++;
          if (e.evaluate(made()) === true) seen.trueAnswers++;
        }
      }),
      { numRuns: 1500 },
    );
    // the generated cases exercise both paths, and both answers
    expect(seen.withFast).toBeGreaterThan(seen.expressions / 3);
    expect(seen.fastAnswers).toBeGreaterThan(500);
    expect(seen.celAnswers).toBeGreaterThan(100);
    expect(seen.trueAnswers).toBeGreaterThan(200);
  });

  test("the shapes the benchmark's policy is written in all have a fast path", () => {
    const shapes = [
      "req.url.path.startsWith('/admin')",
      "req.method != 'GET' && req.method != 'HEAD'",
      "!inCidrRange(conn.client_ip, '10.0.0.0/8')",
      "req.user_agent.contains('BadBot')",
      "req.url.path == '/old'",
      "'x-api-key' in req.headers && req.headers['x-api-key'][0] == 'revoked'",
      "req.method in ['POST', 'PUT']",
      "hasReqHeader('authorization')",
      "conn.client_port > 1024",
    ];
    for (const text of shapes) {
      const e = compileExpression(text, "on_http_request", "condition", DEFAULT_POLICY_LIMITS);
      if ("kind" in e) throw new Error(`${text}: ${e.message}`);
      expect(e.fast === undefined ? `${text}: no fast path` : "fast").toBe("fast");
    }
  });

  test("a header that is not there, an index past a list's end: no fast answer, CEL's error", () => {
    const b = bindingsOf({ method: "GET", path: "/", query: "a=1", headers: [["x-api-key", "ok"]], clientIp: "127.0.0.1", host: "app.example.com", scheme: "https" }, "on_http_request");
    for (const text of ["req.headers['x-missing'][0] == 'a'", "req.headers['x-api-key'][1] == 'ok'", "req.query_params['b'][0] == '1'"]) {
      const e = compileExpression(text, "on_http_request", "condition", DEFAULT_POLICY_LIMITS);
      if ("kind" in e) throw new Error(e.message);
      expect(e.fast).toBeDefined();
      expect(e.fast!(b)).toBeUndefined();
      const out = e.evaluate(b);
      expect(isCelError(out)).toBe(true);
      expect(isCelError(out) && out.message).toBe((e.evaluateByCel(b) as { message: string }).message);
    }
  });
});

/** A policy of these rules (each a list of expressions), each rule logging its number when it matches. */
function policyOfRules(rules: string[][], phase: Phase): string {
  return JSON.stringify({ [phase]: rules.map((expressions, i) => ({ name: `r${i}`, expressions, actions: [{ type: "log", config: { metadata: { rule: i } } }] })) });
}

/** What CEL alone says of each rule on a request: the rules that match, and the problems told (the run's words). */
function byCelAlone(rules: string[][], phase: Phase, made: () => Bindings): { matched: string[]; problems: string[] } {
  const matched: string[] = [];
  const problems: string[] = [];
  rules.forEach((expressions, i) => {
    for (const text of expressions) {
      const e = compileExpression(text, phase, "condition", DEFAULT_POLICY_LIMITS) as CompiledExpression;
      const v = e.evaluateByCel(made());
      if (v === true) continue;
      if (isCelError(v)) problems.push(`r${i}: ${text}: ${v.message}`);
      return;
    }
    matched.push(`r${i}`);
  });
  return { matched, problems };
}

describe("a phase's conditions as one function", () => {
  test("match the rules CEL alone matches, and tell its problems, on generated policies and requests", async () => {
    const compiles = (text: string, phase: Phase) => !("kind" in compileExpression(text, phase, "condition", DEFAULT_POLICY_LIMITS));
    let matchedSome = 0;
    let toldSome = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(condition, { maxLength: 3 }), { minLength: 1, maxLength: 8 }),
        fc.array(request, { minLength: 3, maxLength: 3 }),
        fc.constantFrom<Phase>("on_http_request", "on_http_response"),
        async (drawn, requests, phase) => {
          const rules = drawn.map((r) => r.filter((text) => compiles(text, phase)));
          const policy = policyOf(policyOfRules(rules, phase));
          for (const r of requests) {
            const made = () => bindingsOf(r, phase);
            const b = made();
            const out = await policy.run(phase, { ...b.input, request: b.input.request, response: b.response ? { status: 200, headers: [["Content-Type", "text/plain"]] } : undefined });
            const want = byCelAlone(rules, phase, made);
            expect(out.matched.map((m) => m.rule)).toEqual(want.matched);
            expect(out.problems.map((p) => `${p.rule}: ${p.message}`)).toEqual(want.problems);
            if (want.matched.length > 0) matchedSome++;
            if (want.problems.length > 0) toldSome++;
          }
        },
      ),
      { numRuns: 300 },
    );
    expect(matchedSome).toBeGreaterThan(100);
    expect(toldSome).toBeGreaterThan(20);
  });

  test("read the request as the actions before left it", async () => {
    const policy = policyOf(`
on_http_request:
  - expressions: ["req.url.path == '/a'"]
    actions: [{ type: url-rewrite, config: { from: "/a$", to: "/b" } }]
  - expressions: ["req.url.path == '/b'", "hasReqHeader('x-added')"]
    actions: [{ type: deny, config: { status_code: 410 } }]
  - expressions: ["req.url.path == '/b'"]
    actions: [{ type: add-headers, config: { headers: { x-added: "1" } } }]
  - expressions: ["req.url.path == '/b'", "hasReqHeader('x-added')"]
    actions: [{ type: deny, config: { status_code: 409 } }]
`);
    const out = await policy.run("on_http_request", requestInput({ target: "/a" }));
    expect(out.verdict.kind === "respond" && `${out.verdict.response.status} ${out.verdict.response.body}`).toBe("409 ");
    expect(out.matched.map((m) => m.rule)).toEqual(["#1", "#3", "#4"]);
  });

  test("a phase too large to write as one function is judged rule by rule, to the same answers", async () => {
    // 1,000 rules of 8 expressions: more code than one function is written with
    const rule = (i: number) => `  - expressions: [${Array.from({ length: 8 }, (_, j) => `"req.url.path != '/r${i}-${j}'"`).join(", ")}, "req.url.path == '/r${i}'"]
    actions: [{ type: deny, config: { status_code: ${400 + (i % 100)} } }]`;
    const policy = policyOf(`on_http_request:\n${Array.from({ length: 1000 }, (_, i) => rule(i)).join("\n")}\n`);
    for (const i of [0, 1, 517, 999]) {
      const out = await policy.run("on_http_request", requestInput({ target: `/r${i}` }));
      expect(out.verdict.kind === "respond" && out.verdict.response.status).toBe(400 + (i % 100));
      expect(out.matched.map((m) => m.rule)).toEqual([`#${i + 1}`]);
    }
    expect((await policy.run("on_http_request", requestInput({ target: "/none" }))).verdict.kind).toBe("continue");
  });
});
