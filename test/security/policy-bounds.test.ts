/**
 * Hostile policies (the class: a policy document that makes the edge spend
 * unbounded CPU or memory, at load or per request). A tunnel's policy is
 * written by its user, not trusted with the edge: each way a document can
 * grow the work is refused at load with an error that names the cap, or
 * bounded at run time with a 500 (never the rest of the rules skipped and
 * the request let through). Each case is also held to a time bound, a
 * liveness check well above what it takes.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_POLICY_LIMITS, loadPolicy, type PolicyError } from "../../src/policy/index.ts";
import { answered, policyOf, requestInput } from "../policy/policy-harness.ts";

/** Loads `text`, expecting a refusal; returns the errors, and checks it took less than `ms`. */
function refused(text: string, ms = 5000): PolicyError[] {
  const started = performance.now();
  const out = loadPolicy(text);
  expect(performance.now() - started).toBeLessThan(ms);
  if (!Array.isArray(out)) throw new Error("the hostile policy loaded");
  return out;
}
const rule = (expression: string) => `on_http_request:\n  - expressions: [${JSON.stringify(expression)}]\n    actions: [{ type: deny }]\n`;

describe("refused at load", () => {
  test("deep expressions: parentheses, lists and maps nested past the cap are refused before the parser recurses", () => {
    for (const open of ["(", "[", "{1:"]) {
      const close = { "(": ")", "[": "]", "{1:": "}" }[open]!;
      const n = 1000;
      const [e] = refused(rule(`${open.repeat(n)}1${close.repeat(n)} == 1`));
      expect(e).toMatchObject({ code: "CEL_TOO_COMPLEX" });
      expect(e!.message).toContain("nests deeper than 64");
    }
  });

  test("a deep chain of operators (a left-deep tree) is refused by the checker's depth", () => {
    const [e] = refused(rule(`${Array(200).fill("1").join(" + ")} > 0`));
    expect(e!.code).toBe("CEL_TOO_COMPLEX");
  });

  test("a deeply nested YAML document is a syntax error, not a crash", () => {
    const [e] = refused(`on_http_request: ${"[".repeat(50_000)}${"]".repeat(50_000)}`);
    expect(e!.code).toBe("POLICY_SYNTAX");
  });

  test("huge literals: a long string, a long list, a map literal of many entries", () => {
    expect(refused(rule(`'${"a".repeat(10_000)}' == 'a'`))[0]).toMatchObject({ code: "CEL_TOO_COMPLEX", message: expect.stringContaining("longer than 4096") });
    const list = `[${Array.from({ length: 1500 }, (_, i) => i).join(",")}].size() > 0`;
    expect(refused(rule(list))[0]!.code).toBe("CEL_TOO_COMPLEX");
  });

  test("an expression of exponential cost (loops inside loops) is refused by its estimate", () => {
    const ten = `[${Array.from({ length: 10 }, (_, i) => i).join(",")}]`;
    const [e] = refused(rule(`${ten}.exists(a, ${ten}.exists(b, ${ten}.exists(c, ${ten}.exists(d, ${ten}.exists(f, a+b+c+d+f == 99)))))`));
    expect(e).toMatchObject({ code: "CEL_TOO_COMPLEX", message: expect.stringContaining("estimated cost") });
    const [h] = refused(rule("req.headers.exists(a, req.headers.exists(b, req.headers.exists(c, a == b && b == c)))"));
    expect(h!.code).toBe("CEL_TOO_COMPLEX");
  });

  test("10,000 rules: refused by their count alone, before any is compiled", () => {
    const many = `on_http_request:\n${"  - actions: [{ type: deny }]\n".repeat(10_000)}`;
    const errors = refused(many, 10_000);
    expect(errors).toEqual([{ code: "POLICY_LIMIT", message: `the document has 10000 rules; a policy may have ${DEFAULT_POLICY_LIMITS.maxRules} at most` }]);
  });

  test("a document over the size cap is refused before it is parsed", () => {
    const big = `# ${"x".repeat(DEFAULT_POLICY_LIMITS.maxDocumentBytes)}\non_http_request: []\n`;
    expect(refused(big)[0]!.code).toBe("POLICY_TOO_LARGE");
  });

  test("aliases (the billion-laughs document) are refused", () => {
    const laughs = ["a: &a [x,x,x,x,x,x,x,x,x]", ...Array.from({ length: 9 }, (_, i) => `l${i}: &l${i} [${Array(9).fill(i === 0 ? "*a" : `*l${i - 1}`).join(",")}]`)].join("\n");
    expect(refused(laughs)[0]!.code).toBe("POLICY_SYNTAX");
  });

  test("too many expressions or actions in a rule, too many interpolations in a string", () => {
    const exprs = `on_http_request:\n  - expressions: [${Array(20).fill('"true"').join(", ")}]\n    actions: [{ type: deny }]\n`;
    expect(refused(exprs)[0]!.code).toBe("POLICY_LIMIT");
    const actions = `on_http_request:\n  - actions: [${Array(20).fill("{ type: deny }").join(", ")}]\n`;
    expect(refused(actions)[0]!.code).toBe("POLICY_LIMIT");
    const interpolations = `on_http_request:\n  - actions:\n      - type: custom-response\n        config: { body: "${"${req.method}".repeat(20)}" }\n`;
    expect(refused(interpolations)[0]!.code).toBe("CEL_TOO_COMPLEX");
  });
});

describe("bounded at run time", () => {
  const headers = Array.from({ length: 200 }, (_, i) => [`x-h${i}`, "v".repeat(20)] as [string, string]);

  test("loops over a request larger than the estimate run out of budget: 500, never a skipped rule", async () => {
    // estimated at 50 x 50 headers, run on 200 x 200: 40,000 steps, past the 10,000 a run may spend
    const p = policyOf(rule("req.headers.all(a, req.headers.all(b, size(a + b) > 0))"));
    const started = performance.now();
    const out = await p.run("on_http_request", requestInput({ headers }));
    expect(performance.now() - started).toBeLessThan(5000);
    expect(answered(out)?.status).toBe(500);
    expect(out.problems).toEqual([expect.objectContaining({ code: "COST_EXCEEDED" })]);
  });

  test("the budget is one per run: many rules each under the cap cannot add up past it", async () => {
    const each = "req.headers.all(a, req.headers.all(b, true))";
    const p = policyOf(`on_http_request:\n${Array.from({ length: 20 }, () => `  - expressions: [${JSON.stringify(each)}]\n    actions: [{ type: log, config: { metadata: { x: y } } }]\n`).join("")}`);
    const out = await p.run("on_http_request", requestInput({ headers: headers.slice(0, 40) }));
    expect(answered(out)?.status).toBe(500);
    expect(out.matched.length).toBeLessThan(20);
  });

  test("in on_tcp_connect a run past its budget closes the connection", async () => {
    // two expressions, each estimated (exactly: literal lists) at 5,680 steps, together past the 10,000 of one run
    const loops = `[${Array.from({ length: 80 }, (_, i) => i).join(",")}].all(a, [${Array.from({ length: 70 }, (_, i) => i).join(",")}].all(b, a + b >= 0))`;
    const p = policyOf(`on_tcp_connect:\n  - expressions: ["${loops}", "${loops}"]\n    actions: [{ type: deny }]\n`);
    const out = await p.run("on_tcp_connect", requestInput());
    expect(out.verdict.kind).toBe("close");
    expect(out.problems[0]!.code).toBe("COST_EXCEEDED");
  });

  test("a string an expression makes is capped in size (a replace that would make megabytes fails, and the rule does not match)", async () => {
    const p = policyOf(rule(`size(req.headers['x-big'][0].replace('', '${"y".repeat(3000)}')) > 0`));
    const started = performance.now();
    const out = await p.run("on_http_request", requestInput({ headers: [["X-Big", "a".repeat(4000)]] }));
    // refused before it is made: making the 12 MB first takes seconds
    expect(performance.now() - started).toBeLessThan(1000);
    expect(out.verdict.kind).toBe("continue");
    expect(out.problems[0]!.message).toContain("bytes");
  });

  test("a redirect pattern slow on a long URL fails its action instead of holding the edge", async () => {
    const p = policyOf(`on_http_request:\n  - actions:\n      - type: redirect\n        config: { from: "(a*c)?", to: "/x" }\n`);
    const started = performance.now();
    const out = await p.run("on_http_request", requestInput({ target: `/${"a".repeat(20_000)}` }));
    expect(performance.now() - started).toBeLessThan(5000);
    expect(out.verdict.kind).toBe("continue");
    expect(out.problems[0]!.message).toContain("steps");
  });
});
