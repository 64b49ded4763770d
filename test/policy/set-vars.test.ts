/**
 * set-vars, as ngrok documents it: `vars.<name>` set in order, read by
 * the later actions and rules of the same phase in expressions and
 * interpolation; a value keeps its type (numbers, bools, lists, maps, and
 * a string that is exactly one `${...}`); a var never set is an error, so
 * the rule reading it does not match; the vars of one phase (or one
 * policy) are not another's.
 */
import { describe, expect, test } from "bun:test";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

describe("set-vars", () => {
  test("ngrok's example: values of every type, read by a later rule's expression and its interpolation", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: set-vars
        config:
          vars:
            - sample_string: bar
            - sample_double: 1.5
            - sample_bool: true
            - sample_null: null
            - sample_list: [1, 2, 3]
            - sample_map: { key: value }
            - sample_nested_map: { key: [value1, value2] }
  - expressions: ["vars.sample_bool == true", "vars.sample_list[1] == 2", "vars.sample_null == null"]
    actions:
      - type: custom-response
        config:
          status_code: 200
          body: "\${vars.sample_string} \${vars.sample_double} \${vars.sample_list[0]} \${vars.sample_map.key} \${vars.sample_nested_map.key[1]}"
`);
    const out = await p.run("on_http_request", requestInput());
    expect(answered(out)?.body).toBe("bar 1.5 1 value value2");
    expect(out.problems).toEqual([]);
  });

  test("interpolation: exactly one ${...} keeps its type, text around it makes text; a var reads the ones set before it", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: set-vars
        config:
          vars:
            - n: "\${int(50.5)}"
            - path: "\${req.url.path}"
            - greeting: "Your IP is \${conn.client_ip}!"
            - both: "\${vars.path}-\${vars.n + 1}"
            - nested: { ip: "\${conn.client_ip}", parts: ["\${vars.n}", x] }
  - expressions: ["vars.n == 50", "type(vars.greeting) == string", "vars.nested.parts[0] == 50"]
    actions:
      - type: add-headers
        config: { headers: { x-greeting: "\${vars.greeting}", x-both: "\${vars.both}", x-ip: "\${vars.nested.ip}" } }
`);
    const out = await p.run("on_http_request", requestInput({ target: "/p", clientIp: "198.51.100.7" }));
    expect(out.matched.map((r) => r.rule)).toEqual(["#1", "#2"]);
    expect(out.request!.headers.filter(([n]) => n.startsWith("x-"))).toEqual([
      ["x-greeting", "Your IP is 198.51.100.7!"],
      ["x-both", "/p-51"],
      ["x-ip", "198.51.100.7"],
    ]);
  });

  test("a var set later in the list replaces the one before; actions after it in the same rule read it", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: set-vars
        config: { vars: [{ tier: free }, { tier: "\${req.headers['x-plan'][0]}" }] }
      - type: custom-response
        config: { status_code: 200, body: "\${vars.tier}" }
`);
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["X-Plan", "pro"]] })))?.body).toBe("pro");
  });

  test("a var never set is an error: the rule reading it does not match, and it is told", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["vars.unset == 'x'"]
    actions: [{ type: deny }]
  - expressions: ["!(vars.unset == 'x')"]
    actions: [{ type: deny, config: { status_code: 404 } }]
`);
    const out = await p.run("on_http_request", requestInput());
    expect(out.verdict.kind).toBe("continue");
    expect(out.problems.map((x) => x.code)).toEqual(["EVALUATION_ERROR", "EVALUATION_ERROR"]);
    expect(out.problems[0]!.message).toContain("unset");
  });

  test("an interpolation that fails leaves the var unset (told), never set to something else", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: set-vars
        config: { vars: [{ h: "\${req.headers['nope'][0]}" }] }
  - expressions: ["'h' in vars"]
    actions: [{ type: deny }]
`);
    const out = await p.run("on_http_request", requestInput());
    expect(out.verdict.kind).toBe("continue");
    expect(out.problems[0]!.message).toContain("vars.h");
  });

  test("vars are scoped to their phase, as ngrok scopes them: one set on the request is not on the response", async () => {
    const p = policyOf(`
on_tcp_connect:
  - actions:
      - type: set-vars
        config: { vars: [{ seen: "\${conn.client_ip}" }] }
  - expressions: ["vars.seen == '203.0.113.10'"]
    actions: [{ type: deny }]
on_http_response:
  - expressions: ["'seen' in vars"]
    actions: [{ type: custom-response, config: { status_code: 500 } }]
`);
    expect((await p.run("on_tcp_connect", requestInput())).verdict.kind).toBe("close");
    expect((await p.run("on_http_response", requestInput({ response: { status: 200 } }))).verdict.kind).toBe("continue");
  });

  test("its config is checked at load: one name per entry, a list of at least one, the interpolations compiled", () => {
    expect(errorsOf(`
on_http_request:
  - actions:
      - type: set-vars
        config: { vars: [{ a: 1, b: 2 }] }
`)[0]!.message).toContain("one variable");
    expect(errorsOf(`
on_http_request:
  - actions:
      - type: set-vars
        config: { vars: [] }
`)[0]!.code).toBe("ACTION_CONFIG");
    expect(errorsOf(`
on_http_request:
  - actions:
      - type: set-vars
        config: { vars: [{ a: "\${res.status_code}" }] }
`)[0]!.code).toBe("CEL_TYPE");
  });
});
