/**
 * Identity spoofing through a traffic policy (the class: a visitor names
 * themselves to the service in the field the edge uses to say who signed
 * in). X-Burrow-User-Email is the edge's: an openid-connect action sets it
 * for the visitor it let in, and a visitor's own never reaches the service,
 * nor the policy's rules, whatever the policy does (no sign-in action, a
 * basic-auth one, rules that read and copy headers), in any spelling.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { withPolicy, type Echoed, type PolicyTunnel } from "../traffic-policy/rig.ts";

let t: PolicyTunnel;
beforeAll(async () => {
  t = await withPolicy(`
on_http_request:
  - expressions: ["req.url.path.startsWith('/locked')"]
    actions: [{ type: basic-auth, config: { credentials: ["ann:correct horse"] } }]
  - actions:
      - type: add-headers
        config: { headers: { x-seen-email: "\${getReqHeader('x-burrow-user-email').join(',')}", x-identity: "\${visitor.identity}" } }
`);
}, 30_000);
afterAll(() => t?.close());

describe("a visitor's own X-Burrow-User-Email", () => {
  for (const spelling of ["X-Burrow-User-Email", "x-burrow-user-email", "X-BURROW-USER-EMAIL"]) {
    test(`${spelling}: neither the rules nor the service see it, on an open path and behind basic-auth`, async () => {
      for (const [path, auth] of [["/open", []], ["/locked/x", ["-u", "ann:correct horse"]]] as const) {
        const r = await t.curl(path, [...auth, "-H", `${spelling}: ceo@example.com`]);
        expect(r.status).toBe(200);
        const seen = (JSON.parse(r.body) as Echoed).headers;
        expect(seen["x-burrow-user-email"]).toBeUndefined();
        expect(seen["x-seen-email"]).toBe("");
        // basic-auth's visitor is the user name; it is never said as an email
        expect(seen["x-identity"]).toBe(path === "/open" ? "" : "ann");
      }
    });
  }
});
