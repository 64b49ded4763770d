/**
 * set-vars through a real tunnel: a var set from the request reaches the
 * service in a header by interpolation, and decides a later rule, with
 * curl against the real server and agent.
 */
import { describe, expect, test } from "bun:test";
import { withPolicy, type Echoed } from "./rig.ts";

describe("set-vars at the edge", () => {
  test("a var reaches the service in a header by interpolation and decides a later rule", async () => {
    await using t = await withPolicy(`
on_http_request:
  - actions:
      - type: set-vars
        config:
          vars:
            - plan: "\${'x-plan' in req.headers ? req.headers['x-plan'][0] : 'free'}"
            - paid: "\${vars.plan != 'free'}"
  - expressions: ["vars.paid == false && req.url.path.startsWith('/pro')"]
    actions: [{ type: custom-response, config: { status_code: 402, body: "\${vars.plan} plan" } }]
  - actions:
      - type: add-headers
        config: { headers: { x-plan: "plan \${vars.plan}" } }
`);
    const free = await t.curl("/pro/report");
    expect(free.status).toBe(402);
    expect(free.body).toBe("free plan");
    const paid = await t.curl("/pro/report", ["-H", "X-Plan: gold"]);
    expect(paid.status).toBe(200);
    expect((JSON.parse(paid.body) as Echoed).headers["x-plan"]).toBe("gold, plan gold");
  });
});
