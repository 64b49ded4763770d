/**
 * close-connection, as ngrok documents it: no config; in on_tcp_connect
 * and on_http_request it ends the run with the connection closed (no
 * answer), nothing after it running; refused at load in on_http_response
 * and with a config.
 */
import { describe, expect, test } from "bun:test";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";

describe("close-connection", () => {
  test("on_http_request: the run ends closed, with no answer, and nothing after it runs", async () => {
    const p = policyOf(`
on_http_request:
  - name: "Immediately close connection"
    expressions: ['req.url.path.startsWith("/dc")']
    actions:
      - type: close-connection
      - type: custom-response
        config: { status_code: 200 }
  - actions: [{ type: deny }]
`);
    const out = await p.run("on_http_request", requestInput({ target: "/dc/x" }));
    expect(out.verdict).toEqual({ kind: "close", rule: "Immediately close connection", action: "close-connection" });
    expect(out.matched).toEqual([{ rule: "Immediately close connection", actions: [{ type: "close-connection", result: "closed", note: "connection closed" }] }]);
    expect((await p.run("on_http_request", requestInput({ target: "/other" }))).verdict.kind).toBe("respond");
  });

  test("on_tcp_connect: the connection is closed", async () => {
    const p = policyOf("on_tcp_connect:\n  - actions: [{ type: close-connection }]\n");
    expect((await p.run("on_tcp_connect", requestInput())).verdict).toEqual({ kind: "close", rule: "#1", action: "close-connection" });
  });

  test("refused at load in on_http_response, and with a config (it has none)", () => {
    expect(errorsOf("on_http_response:\n  - actions: [{ type: close-connection }]\n")[0]!.code).toBe("ACTION_PHASE");
    expect(errorsOf("on_http_request:\n  - actions: [{ type: close-connection, config: { status_code: 403 } }]\n")[0]!.code).toBe("ACTION_CONFIG");
  });
});
