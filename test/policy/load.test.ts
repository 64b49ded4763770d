/**
 * Loading a policy: YAML and JSON alike; every mistake an error value with
 * its stable code, its line and column in the file, its field's path and
 * its rule; a CEL error with its expression and the column in it; all of a
 * document's mistakes at once; none of the policy used when any is there.
 */
import { describe, expect, test } from "bun:test";
import { formatPolicyError, loadPolicy } from "../../src/policy/index.ts";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";

describe("a document", () => {
  test("YAML and JSON read alike; an empty document is a policy of no rules", async () => {
    const yaml = policyOf("on_http_request:\n  - expressions: [\"req.method == 'POST'\"]\n    actions: [{ type: deny }]\n");
    const json = policyOf(JSON.stringify({ on_http_request: [{ expressions: ["req.method == 'POST'"], actions: [{ type: "deny" }] }] }));
    for (const p of [yaml, json]) expect((await p.run("on_http_request", requestInput({ method: "POST" }))).verdict.kind).toBe("respond");
    const empty = policyOf("");
    expect(empty.size).toEqual({ on_tcp_connect: 0, on_http_request: 0, on_http_response: 0, on_event_stream_message: 0 });
    expect(policyOf("on_http_request: []\non_http_response:\n").has("on_http_request")).toBe(false);
  });

  test("not YAML: one error where the reader stopped", () => {
    expect(errorsOf("on_http_request:\n  - actions: [\n")).toEqual([{ code: "POLICY_SYNTAX", message: expect.stringContaining("not valid YAML or JSON"), line: expect.any(Number), column: expect.any(Number) }]);
  });

  test("the shape: an unknown field (ngrok's old names told), a rule without actions, an expression that is no string", () => {
    const errors = errorsOf(`inbound:
  - actions: [{ type: deny }]
on_http_request:
  - name: first
    expressions: ["true"]
  - expressions: [42]
    actions: []
`);
    expect(errors.map((e) => [e.code, e.path, e.line, e.message]).sort((a, b) => (a[2] as number) - (b[2] as number))).toEqual([
      ["POLICY_SHAPE", "inbound", 1, "unknown field 'inbound' (ngrok's old name for on_http_request)"],
      ["POLICY_SHAPE", "on_http_request[0].actions", 4, "on_http_request[0]: the field 'actions' is missing"],
      ["POLICY_SHAPE", "on_http_request[1].expressions[0]", 6, "on_http_request[1].expressions[0]: Invalid type: Expected string but received 42"],
    ]);
  });

  test("an action burrow does not have is refused with its name and its line (and why, for ngrok's)", () => {
    const errors = errorsOf(`on_http_request:
  - actions:
      - type: deny
      - type: forward-internal
        config: { url: https://internal.example }
      - type: make-coffee
`);
    expect(errors.map((e) => [e.code, e.line, e.column])).toEqual([
      ["ACTION_UNKNOWN", 4, 15],
      ["ACTION_UNKNOWN", 6, 15],
    ]);
    expect(errors[0]!.message).toStartWith("burrow has no action 'forward-internal': burrow has no internal endpoints");
    expect(errors[1]!.message).toStartWith("burrow has no action 'make-coffee' (it has add-headers, basic-auth,");
  });

  test("an action in a phase it does not run in", () => {
    const [e] = errorsOf("on_tcp_connect:\n  - actions: [{ type: redirect, config: { to: /x } }]\n");
    expect(e).toMatchObject({ code: "ACTION_PHASE", line: 2, message: "'redirect' does not run in on_tcp_connect (only in on_http_request)" });
  });

  test("every mistake of the document at once, each with its rule; nothing of it is used", () => {
    const errors = errorsOf(`on_http_request:
  - name: a
    expressions: ["nope"]
    actions: [{ type: deny }]
  - name: b
    actions: [{ type: deny, config: { status_code: 1000 } }]
  - actions: [{ type: custom-response, config: { bodyy: x } }]
`);
    expect(errors.map((e) => [e.code, e.rule])).toEqual([
      ["CEL_TYPE", "a"],
      ["ACTION_CONFIG", "b"],
      ["ACTION_CONFIG", "#3"],
    ]);
    expect(errors[2]!.message).toBe("custom-response: unknown field 'bodyy'");
  });
});

describe("CEL errors: the expression, the column in it, and where that is in the file", () => {
  test("plain, quoted and flow-list expressions: the exact line and column of the error in the file", () => {
    const text = `on_http_request:
  - expressions:
      - req.method == 'GET' && req.nope
      - "req.url.path.startsWith(1)"
    actions: [{ type: deny }]
  - expressions: ['res.status_code == 200', "req.method =="]
    actions: [{ type: deny }]
`;
    const errors = errorsOf(text);
    const lines = text.split("\n");
    // in each, the error's column in the file is where the expression starts in its line, plus its column in the expression
    for (const e of errors) expect(e.column).toBe(lines[e.line! - 1]!.indexOf(e.expression!) + e.expressionColumn!);
    expect(errors.map((e) => [e.code, e.line, e.column, e.expressionColumn])).toEqual([
      ["CEL_TYPE", 3, 35, 27],
      ["CEL_TYPE", 4, 22, 13],
      ["CEL_TYPE", 6, 23, 4],
      ["CEL_SYNTAX", 6, 57, 12],
    ]);
    expect(errors[0]!.message).toContain("undeclared reference to 'req.nope'");
    expect(errors[1]!.message).toBe("found no matching overload for 'startsWith' applied to 'string.startsWith(int)'");
    expect(errors[2]!.message).toBe("res.status_code is not available in on_http_request (only in on_http_response, on_event_stream_message)");
    expect(errors[0]!.expression).toBe("req.method == 'GET' && req.nope");
  });

  test("a folded (block) expression: where it starts in the file, the column in the expression", () => {
    const [e] = errorsOf(`on_http_request:
  - expressions:
      - >-
        req.method == 'GET' &&
        size(req.headers) > 'x'
    actions: [{ type: deny }]
`);
    expect(e).toMatchObject({ code: "CEL_TYPE", line: 3, column: 9, expression: "req.method == 'GET' && size(req.headers) > 'x'", expressionColumn: 41 });
    expect(formatPolicyError(e!, "p.yml")).toEndWith(`    req.method == 'GET' && size(req.headers) > 'x'\n    ${" ".repeat(40)}^`);
  });

  test("a condition must be a bool", () => {
    expect(errorsOf(`on_http_request:\n  - expressions: ["req.url.path"]\n    actions: [{ type: deny }]\n`)[0]!.message).toBe("a rule's expression must be true or false; this one is a string");
  });

  test("interpolation: an unclosed ${, and a CEL error inside one with its column in the expression", () => {
    const errors = errorsOf(`on_http_request:
  - actions:
      - type: custom-response
        config: { body: "hello \${req.method" }
      - type: add-headers
        config: { headers: { x-a: "id=\${visitor.identity + 1}" } }
`);
    expect(errors.map((e) => [e.code, e.line, e.column, e.expression, e.expressionColumn])).toEqual([
      ["TEMPLATE_SYNTAX", 4, 32, undefined, undefined],
      ["CEL_TYPE", 6, 58, "visitor.identity + 1", 18],
    ]);
  });

  test("formatPolicyError: file:line:column, the words, the rule and the code, then the expression with a caret", () => {
    const [e] = errorsOf(`on_http_request:\n  - name: api\n    expressions: ["req.method == 1.5.x"]\n    actions: [{ type: deny }]\n`);
    expect(formatPolicyError(e!, "policy.yml")).toBe(`policy.yml:3:${e!.column}: ${e!.message} (rule api) [${e!.code}]\n    req.method == 1.5.x\n    ${" ".repeat(e!.expressionColumn! - 1)}^`);
  });
});

describe("the checker, beyond names", () => {
  const ok = (expression: string, phase = "on_http_request") => {
    const p = loadPolicy(`${phase}:\n  - expressions: [${JSON.stringify(expression)}]\n    actions: [{ type: log, config: { metadata: { a: b } } }]\n`);
    if (Array.isArray(p)) throw new Error(`${expression}: ${p[0]!.message}`);
  };
  const refused = (expression: string) => errorsOf(`on_http_request:\n  - expressions: [${JSON.stringify(expression)}]\n    actions: [{ type: deny }]\n`)[0]!;

  test("what ngrok's documented expressions use is taken", () => {
    for (const e of [
      "req.url.path.startsWith('/api/v1/')",
      "conn.client_ip in ['2001:4860:7:f0e::f4', '98.35.32.113']",
      "!(conn.client_ip in ['98.35.32.113'])",
      "getReqHeader('User-Agent').exists(v, v.matches('(?i)google-images'))",
      "size(getQueryParam('q')) == 0",
      "hasReqHeader('X-Version-Id') && hasQueryParam('q') && hasReqCookie('session')",
      "getReqCookie('session').value == 'x'",
      "inCidrRanges(conn.client_ip, ['66.249.66.1/24', '2001:4860::/32'])",
      "has(req.headers.x_custom_header)",
      "req.headers['authorization'][0] == 'Bearer my-token'",
      "type(req.method) == string && type(req.content_length) == int",
      "req.url.query_params['a'].all(v, v.size() < 10) && req.query_params.size() < 20",
      "timestamp('2023-12-25T00:00:00Z').getDate('America/Los_Angeles') == 24",
      "'a,b'.split(',').map(x, x.upperAscii()).join('-') == 'A-B'",
      "json_like == null".replace("json_like", "req.cookies['a']"),
      "json.decode(getReqHeader('x-json-array')[0])[0] == \"first entry\"",
      "json.encode(req.content_type.parameters) == '{\"charset\":\"UTF-8\"}'",
      "queryString.decode(req.url.query)[\"q\"] == \"hello\"",
      "queryString.encode({\"q\":\"policy\"}) == req.url.query",
      "url.parse(req.url).host == 'ngrok.com'",
      "'gums'.reverse() == 'smug' && 'John Smith'.reverse() == 'htimS nhoJ'",
    ])
      ok(e);
    ok("res.status_code >= 500 && getResHeader('Content-Type').exists(v, v.contains('json'))", "on_http_response");
    for (const e of [
      "getResCookie('_device_id').value == 'mobile-phone-14'",
      "hasResCookie('_device_id')",
      "size(res.cookies) > 0",
      "res.cookies['sessionId'][0].domain == 'nba.com'",
      "res.cookies['sessionId'][0].expires > timestamp(time.now)",
      "res.cookies['sessionId'][0].http_only",
      "res.cookies['sessionId'][0].max_age > duration('24h')",
      "size(res.cookies['sessionId'][0].unparsed_attributes) > 0",
      "res.cookies['sessionId'][0].value > 'value'",
    ])
      ok(e, "on_http_response");
    ok("conn.client_port > 1024 && tunnel.kind == 'tcp'", "on_tcp_connect");
  });

  test("what a checker refuses is refused: undeclared functions, wrong argument types, non-bool operands, indexing a string, messages", () => {
    expect(refused("nosuch(1)").message).toBe("undeclared reference to function 'nosuch'");
    expect(refused("inCidrRange(conn.client_ip, 8)").message).toContain("found no matching overload for 'inCidrRange'");
    expect(refused("req.method && true").message).toBe("&& takes bools, not a string");
    expect(refused("req.method[0] == 'G'").message).toBe("a string cannot be indexed with []");
    expect(refused("req.headers[1] == []").message).toContain("this map's keys are strings");
    expect(refused("google.protobuf.Int64Value{value: 1} == 1").code).toBe("CEL_TYPE");
    expect(refused("req.url.nope == 'x'").message).toBe("a string has no field 'nope'");
    expect(refused("req == 1").message).toContain("'req' is not a value");
    expect(refused("getResHeader('x').size() > 0").code).toBe("CEL_TYPE");
  });
});
