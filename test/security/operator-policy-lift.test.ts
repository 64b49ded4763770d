/**
 * An operator's policy lifted by a tunnel's own (the class: a user's
 * tunnel weakening what the server's operator enforces). The operator's
 * layers run before the tunnel's policy on a request, so a rule of the
 * tunnel's that answers everything itself (a custom response) never runs
 * for a request the operator's deny or rate limit refused; and after it on
 * a response, so a header the operator adds cannot be taken off by the
 * tunnel's. Through the real server and agent, the operator's policy made
 * through /api/policies while the tunnel is live.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { curl } from "../traffic-policy/curl.ts";
import { echo, policyFile } from "../traffic-policy/rig.ts";

let rig: Rig;
let upstream: ReturnType<typeof Bun.serve>;
const agents: TestAgent[] = [];

beforeAll(async () => {
  rig = await withServer({ user: { skip_warning: true } });
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
}, 30_000);
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await rig?.close();
  upstream?.stop(true);
});

const tunnelUrl = (sub: string, path = "/") => `http://${sub}.localhost:${rig.server.edgePort}${path}`;
async function tunnel(sub: string, args: string[] = []): Promise<TestAgent> {
  const a = await startAgent({ kind: "http", target: upstream.port!, server: rig.server.edgeUrl, token: rig.token, args: ["--subdomain", sub, ...args] });
  agents.push(a);
  return a;
}

/** Polls `check` every 100 ms until it holds, for at most `ms`. */
async function within(ms: number, check: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < Math.ceil(ms / 100) + 1; i++) {
    if (await check()) return;
    await Bun.sleep(100);
  }
  throw new Error(`not within ${ms} ms`);
}

describe("the operator above the tunnel", () => {
  test("a tunnel's own policy cannot lift an operator's deny or rate limit, nor have the last word on a response", async () => {
    using own = policyFile(`
on_http_request:
  - name: lets everything in and answers itself
    actions: [{ type: custom-response, config: { status_code: 200, body: "the agent's answer" } }]
on_http_response:
  - actions:
      - type: remove-headers
        config: { headers: [x-frame-options] }
      - type: add-headers
        config: { headers: { x-from-tunnel: "yes" } }
`);
    await tunnel("lifted", ["--policy-file", own.path]);
    expect((await curl(tunnelUrl("lifted", "/admin"))).body).toBe("the agent's answer");
    const op = await rig.api.post("/api/policies", {
      name: "operator above",
      scope: "hostname",
      hostname: "lifted.localhost",
      policy: `
on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny }]
  - actions:
      - type: rate-limit
        config: { name: op, algorithm: sliding_window, capacity: 2, rate: 60s }
on_http_response:
  - actions: [{ type: add-headers, config: { headers: { x-frame-options: DENY } } }]
`,
    });
    await within(5_000, async () => (await curl(tunnelUrl("lifted", "/admin"))).status === 403);
    // the agent's own rule answers every request it sees: those the operator let through (2 a minute), and no more
    const replies = [];
    for (let i = 0; i < 4; i++) replies.push(await curl(tunnelUrl("lifted", "/x")));
    expect(replies.map((r) => r.status)).toEqual([200, 200, 429, 429]);
    await rig.api.delete(`/api/policies/${op.body.id}`);
  }, 30_000);

  test("on a response the operator's rules run after the tunnel's: a header the tunnel removes, the operator's adds back", async () => {
    using own = policyFile(`
on_http_response:
  - actions: [{ type: remove-headers, config: { headers: [x-frame-options, x-from-service] } }]
`);
    await tunnel("last-word", ["--policy-file", own.path]);
    const op = await rig.api.post("/api/policies", {
      name: "last word",
      scope: "hostname",
      hostname: "last-word.localhost",
      policy: "on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-frame-options: DENY } } }]\n",
    });
    await within(5_000, async () => (await curl(tunnelUrl("last-word"))).headers["x-frame-options"] === "DENY");
    expect((await curl(tunnelUrl("last-word"))).headers["x-from-service"]).toBeUndefined();
    await rig.api.delete(`/api/policies/${op.body.id}`);
  }, 30_000);
});
