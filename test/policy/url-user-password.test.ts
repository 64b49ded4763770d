/**
 * ngrok's `req.url.user_password`: a string of the request's phases, so a
 * policy written for ngrok loads; empty for every request (the edge refuses
 * a target that carries userinfo before any policy runs), in expressions
 * and in interpolation; refused where it is used as another type or in
 * on_tcp_connect, which has no request.
 */
import { describe, expect, test } from "bun:test";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

describe("req.url.user_password", () => {
  test("empty, in a condition and interpolated", async () => {
    const p = policyOf(`
on_http_request:
  - expressions: ["req.url.user_password == '' && size(req.url.user_password) == 0"]
    actions: [{ type: custom-response, config: { status_code: 200, body: "up=\${req.url.user_password}" } }]
`);
    expect(answered(await p.run("on_http_request", requestInput()))?.body).toBe("up=");
  });

  test("loads in both HTTP phases", () => {
    policyOf(`on_http_request:\n  - expressions: ["req.url.user_password.startsWith('admin:')"]\n    actions: [{ type: deny }]\n`);
    policyOf(`on_http_response:\n  - expressions: ["req.url.user_password != ''"]\n    actions: [{ type: custom-response, config: { status_code: 403 } }]\n`);
  });

  test("refused as a bool, or in on_tcp_connect", () => {
    for (const [phase, expression] of [
      ["on_http_request", "req.url.user_password"],
      ["on_http_request", "req.url.user_password && true"],
      ["on_tcp_connect", "req.url.user_password == ''"],
    ] as const) {
      const errors = errorsOf(`${phase}:\n  - expressions: ["${expression}"]\n    actions: [{ type: deny }]\n`);
      expect(errors.map((e) => e.code)).toContain("CEL_TYPE");
    }
  });
});
