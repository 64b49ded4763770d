/**
 * ngrok's `req.url.user_password` through the real server, agent and
 * service: a policy written for ngrok that reads it loads and runs. It is
 * empty for every request a policy sees, because a target that carries a
 * `user:password@` is refused with 400 before any policy runs (RFC 9110
 * §4.2.4), its credentials quoted nowhere; curl given such a URL sends them
 * in Authorization instead, and the request goes through.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { rawHttp } from "../harness/raw-http.ts";
import { curl } from "./curl.ts";
import { echo, withPolicy, type Echoed, type PolicyTunnel } from "./rig.ts";

setDefaultTimeout(60_000);

const POLICY = `
on_http_request:
  - expressions: ["req.url.user_password != ''"]
    actions:
      - type: custom-response
        config: { status_code: 403, body: "userinfo \${req.url.user_password}" }
  - actions:
      - type: add-headers
        config:
          headers:
            x-user-password: "up=\${req.url.user_password}"
`;

let t: PolicyTunnel;
/** Requests the service got. */
let served = 0;

beforeAll(async () => {
  t = await withPolicy(POLICY, {
    args: ["--subdomain", "userinfo"],
    upstream: (req: Request) => {
      served++;
      return echo(req);
    },
  });
});

afterAll(async () => {
  await t?.close();
});

describe("req.url.user_password", () => {
  test("an ordinary request: it is empty, and the rules that read it run", async () => {
    const r = await t.curl("/vars");
    expect(r.status).toBe(200);
    expect((JSON.parse(r.body) as Echoed).headers["x-user-password"]).toBe("up=");
  });

  test("curl given user:password in the URL sends them as Authorization, not in the target: empty here too", async () => {
    const r = await curl(`http://alice:s3cret-pw@userinfo.localhost:${t.server.edgePort}/vars`);
    expect(r.status).toBe(200);
    const seen = (JSON.parse(r.body) as Echoed).headers;
    expect(seen["x-user-password"]).toBe("up=");
    expect(seen["authorization"]).toBe(`Basic ${btoa("alice:s3cret-pw")}`);
  });

  test("an absolute-form target that carries user:password is refused with 400 before the policy, never reaching the service, the password quoted nowhere", async () => {
    const host = `userinfo.localhost:${t.server.edgePort}`;
    const before = served;
    const reply = await rawHttp(t.server.edgePort, `GET http://alice:s3cret-pw@${host}/vars HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expect(reply.status).toBe(400);
    expect(reply.head + reply.body).not.toContain("s3cret-pw");
    // the next request is served: the refusal cost the service nothing
    expect((await t.curl("/vars")).status).toBe(200);
    expect(served).toBe(before + 1);
  });
});
