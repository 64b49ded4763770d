/**
 * The edge's CPU held by compiling policies (the class: a user who may
 * open tunnels makes the server compile large traffic policies, one
 * handshake after another, while it serves nobody else: compiling is
 * synchronous, and a policy at the caps takes about a second). Each
 * user's compile time at handshakes is budgeted a minute
 * (--policy-compile-budget): past it a handshake's policy is refused with
 * POLICY_LIMITED before anything is compiled; the same policy for the
 * same tunnel is compiled once, so an agent's reconnects cost nothing.
 */
import { expect, test } from "bun:test";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { withServer } from "../harness/tunnel.ts";

test("compiling is budgeted per user (--policy-compile-budget): past it POLICY_LIMITED before anything is compiled; the same policy for the same tunnel is compiled once", async () => {
  await using rig = await withServer({ server: { args: ["--policy-compile-budget", "100"] } });
  const big = (tag: string) =>
    "on_http_request:\n" +
    Array.from({ length: 300 }, (_, i) => `  - expressions: ["req.url.path.startsWith('/${tag}${i}') && req.method == 'GET'"]\n    actions: [{ type: add-headers, config: { headers: { x-r: "\${conn.client_ip}" } } }]\n`).join("");
  const hello = (policy: string) => jsonPayload({ version: PROTOCOL_VERSION, token: rig.token, tunnels: [{ protocol: "http", subdomain: "budgeted", policy }] });
  const first = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(big("a")), timeoutMs: 20_000 });
  expect(first.type).toBe("READY");
  const other = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(big("b")), timeoutMs: 20_000 });
  expect(other.refusal?.code).toBe("POLICY_LIMITED");
  // the one compiled already is not compiled again: no budget needed
  const again = await sayHello({ port: rig.server.edgePort, via: "websocket", payload: hello(big("a")), timeoutMs: 20_000 });
  expect(again.type).toBe("READY");
}, 60_000);

