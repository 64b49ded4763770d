/**
 * request-body-find-replace and response-body-find-replace in the engine,
 * without a socket: Go's replacement syntax (`$1`, `$name`, `$$`, a group
 * that took no part), the rules in order, the framing fields the request
 * leaves with, the problems told (a body not UTF-8, an encoded response),
 * what fails the action (a pattern made at run time that is none, a rule
 * past its steps, each under the policy's own caps), and what is refused
 * at load (a bad pattern, an empty list, more than 64 rules, a phase).
 */
import { describe, expect, test } from "bun:test";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const requestRule = (replacements: string) => `on_http_request:\n  - actions:\n      - type: request-body-find-replace\n        config: { replacements: ${replacements} }\n`;
const text = (b: Uint8Array | undefined) => (b ? Buffer.from(b).toString("utf8") : undefined);

async function rewrite(replacements: string, body: string | Uint8Array, headers: [string, string][] = [["Content-Length", "999"]]) {
  const out = await policyOf(requestRule(replacements)).run("on_http_request", requestInput({ method: "POST", body, headers }));
  return { out, body: text(out.request?.body), replaced: out.request?.bodyReplaced === true };
}

describe("request-body-find-replace", () => {
  test("Go's replacement: $1 and ${'$'}{name} by number and name, $$ a dollar, a group that took no part empty", async () => {
    const r = await rewrite(String.raw`[{ from: '(?P<k>\w+)=(\d+)(x)?', to: '$2:$k$3 $$' }]`, "a=1 b=2x");
    expect(r.body).toBe("1:a $ 2:bx $");
  });

  test("every match, rules in order; the framing fields become the new length alone", async () => {
    const r = await rewrite("[{ from: 'a', to: 'bb' }, { from: 'b', to: 'c' }]", "abab", [["Transfer-Encoding", "chunked"], ["Content-Length", "4"], ["X-Other", "1"]]);
    expect(r.body).toBe("cccccc");
    expect(r.replaced).toBe(true);
    expect(r.out.request!.headers.filter(([n]) => n !== "Host")).toEqual([["X-Other", "1"], ["Content-Length", "6"]]);
  });

  test("nothing matched: the body is not marked rewritten, its fields stay", async () => {
    const r = await rewrite("[{ from: 'zzz' }]", "abc");
    expect(r.replaced).toBe(false);
    expect(r.out.request!.headers).toContainEqual(["Content-Length", "999"]);
  });

  test("a body that is not UTF-8 goes on unchanged, told as a problem", async () => {
    const r = await rewrite("[{ from: 'a' }]", new Uint8Array([0x61, 0xff, 0x61]));
    expect(r.replaced).toBe(false);
    expect(r.out.problems.map((p) => p.message)).toEqual(["request-body-find-replace: the body is not UTF-8 text, so it goes on unchanged"]);
  });

  test("a pattern made at run time that is none fails the action: 500, ACTION_FAILED", async () => {
    const p = policyOf(requestRule("[{ from: '${req.headers[\"x-p\"][0]}' }]"));
    const out = await p.run("on_http_request", requestInput({ method: "POST", body: "abc", headers: [["X-P", "(a"]] }));
    expect(answered(out)?.status).toBe(500);
    expect(out.problems[0]).toMatchObject({ code: "ACTION_FAILED" });
    expect(out.problems[0]!.message).toContain("replacements[0].from");
  });

  test("a rule past its steps fails the action; the policy's own --policy-pattern-max-steps counts", async () => {
    const yaml = requestRule("[{ from: '(a*c)?', to: 'x' }]");
    // 2,000 a's: this replace takes about 6,000,000 steps (quadratic); the default allows 1,000,000 and 8 a character, 10,000,000 more than enough
    const body = "a".repeat(2000);
    const out = await policyOf(yaml).run("on_http_request", requestInput({ method: "POST", body }));
    expect(answered(out)?.status).toBe(500);
    expect(out.problems[0]!.message).toContain("steps on this body");
    const raised = await policyOf(yaml, { limits: { maxPatternSteps: 10_000_000 } }).run("on_http_request", requestInput({ method: "POST", body }));
    expect(answered(raised)).toBeUndefined();
  });
});

test("the rules of one body share one budget of steps: one rule on a large body passes, twenty that each would have passed fail", async () => {
  const body = "xy".repeat(150_000);
  const one = await rewrite("[{ from: '[xz]', to: 'x' }]", body);
  expect(answered(one.out)).toBeUndefined();
  const twenty = await rewrite(`[${Array.from({ length: 20 }, () => "{ from: '[xz]', to: 'x' }").join(", ")}]`, body);
  expect(answered(twenty.out)?.status).toBe(500);
  expect(twenty.out.problems[0]!.message).toContain("the rules took more than 3400000 steps");
});

test("a rewrite may grow the body to twice its size (or 1 MiB more for a small one), no further: past it the action fails", async () => {
  const tenfold = "xxxxxxxxxx";
  const small = await rewrite(`[{ from: 'a', to: '${tenfold}' }]`, "a".repeat(1000));
  expect(small.body).toBe(tenfold.repeat(1000));
  const big = "a".repeat(600_000);
  const doubled = await rewrite("[{ from: 'a', to: 'bb' }]", big);
  expect(doubled.body!.length).toBe(1_200_000);
  const grown = await rewrite("[{ from: 'a', to: 'bbb' }]", big);
  expect(answered(grown.out)?.status).toBe(500);
  expect(grown.out.problems[0]!.message).toContain("would grow past 1648576 characters");
});

describe("response-body-find-replace", () => {
  const yaml = "on_http_response:\n  - actions:\n      - type: response-body-find-replace\n        config: { replacements: [{ from: 'x', to: '${req.method}' }] }\n";
  test("the run makes its rules (with ${'$'}{...} evaluated) for the edge to apply to the body", async () => {
    const out = await policyOf(yaml).run("on_http_response", requestInput({ method: "PUT", response: { status: 200, headers: [["Content-Type", "text/plain"]] } }));
    expect(out.response!.bodyRewrites!.map((r) => [r.re.pattern, r.to])).toEqual([["x", "PUT"]]);
  });

  test("none for a HEAD, a 204 or 304, a range, or a body the service encoded (told)", async () => {
    const p = policyOf(yaml);
    for (const [method, status, headers] of [
      ["HEAD", 200, []],
      ["GET", 204, []],
      ["GET", 304, []],
      ["GET", 206, [["Content-Range", "bytes 0-9/100"]]],
      ["GET", 200, [["Content-Encoding", "br"]]],
    ] as const) {
      const out = await p.run("on_http_response", requestInput({ method, response: { status, headers: headers.map(([n, v]): [string, string] => [n, v]) } }));
      expect(out.response!.bodyRewrites).toBeUndefined();
    }
    const encoded = await p.run("on_http_response", requestInput({ response: { status: 200, headers: [["Content-Encoding", "br"]] } }));
    expect(encoded.problems[0]!.message).toContain("encoded (br)");
  });
});

describe("at load", () => {
  test("a pattern that is no RE2 one, with its line; an empty list; more than 64 rules; a `to` that is not text; the wrong phase", () => {
    expect(errorsOf(requestRule("[{ from: 'a(?=b)' }]"))[0]).toMatchObject({ code: "ACTION_CONFIG", line: 4 });
    expect(errorsOf(requestRule("[]"))[0]).toMatchObject({ code: "ACTION_CONFIG" });
    expect(errorsOf(requestRule(`[${Array.from({ length: 65 }, () => "{ from: 'a' }").join(", ")}]`))[0]).toMatchObject({ code: "ACTION_CONFIG" });
    expect(errorsOf(requestRule("[{ from: 'a', to: [1] }]"))[0]).toMatchObject({ code: "ACTION_CONFIG" });
    expect(errorsOf("on_http_response:\n  - actions: [{ type: request-body-find-replace, config: { replacements: [{ from: a }] } }]\n")[0]).toMatchObject({ code: "ACTION_PHASE" });
    expect(errorsOf("on_http_request:\n  - actions: [{ type: response-body-find-replace, config: { replacements: [{ from: a }] } }]\n")[0]).toMatchObject({ code: "ACTION_PHASE" });
  });

  test("a pattern longer than the policy's maxPatternLength is refused", () => {
    expect(errorsOf(requestRule(`[{ from: '${"a".repeat(40)}' }]`), { limits: { maxPatternLength: 32 } })[0]!.message).toContain("longer than 32");
  });
});
