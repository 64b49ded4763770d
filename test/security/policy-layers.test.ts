/**
 * Policy layers (the class: a tunnel's own policy weakening what the
 * operator's policy enforces). The operator's layers run first on a
 * connection and a request, and the first layer that answers or closes
 * ends it: the tunnel's policy never runs for a request an operator's rule
 * refused, so no rule of its own (an answer of its own, a header, a URL
 * rewrite) can let it through. On a response the tunnel's layer runs
 * first, so the operator's response rules have the last word. The visitor
 * an operator's authentication let in cannot be renamed by the tunnel's.
 */
import { describe, expect, test } from "bun:test";
import { defaultServices, PolicyChain } from "../../src/policy/index.ts";
import { answered, policyOf, requestInput } from "../policy/policy-harness.ts";

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

const operator = policyOf(
  `
on_tcp_connect:
  - actions:
      - type: restrict-ips
        config: { deny: [192.0.2.0/24] }
on_http_request:
  - actions:
      - type: restrict-ips
        config: { deny: [192.0.2.0/24] }
      - type: rate-limit
        config: { name: server-wide, algorithm: sliding_window, capacity: 2, rate: 60s, bucket_key: [conn.client_ip] }
      - type: basic-auth
        config: { credentials: ["ops:operator-password"] }
on_http_response:
  - actions:
      # replacing a header is removing it, then adding it (add-headers appends)
      - type: remove-headers
        config: { headers: [x-powered-by, strict-transport-security] }
      - type: add-headers
        config: { headers: { strict-transport-security: max-age=63072000 } }
`,
  { source: "operator", services: defaultServices() },
);

/** Everything a tunnel's own policy could try to lift the operator's rules with. */
const tunnel = policyOf(
  `
on_tcp_connect:
  - actions:
      - type: log
        config: { metadata: { seen: "\${conn.client_ip}" } }
on_http_request:
  - actions:
      - type: add-headers
        config: { headers: { authorization: "${basic("mine", "tunnel-password")}" } }
      - type: basic-auth
        config: { credentials: ["mine:tunnel-password"] }
      - type: custom-response
        config: { status_code: 200, body: "the tunnel's own answer to \${visitor.identity}" }
on_http_response:
  - actions:
      - type: remove-headers
        config: { headers: [strict-transport-security] }
      - type: add-headers
        config: { headers: { x-powered-by: tunnel, strict-transport-security: max-age=0 } }
`,
  { source: "tunnel" },
);

const chain = new PolicyChain([operator, tunnel]);
const signedIn = (ip: string) => requestInput({ clientIp: ip, headers: [["Authorization", basic("ops", "operator-password")]] });

describe("the operator's layer before the tunnel's", () => {
  test("an address the operator denies is closed at connect and answered 403 on a request: the tunnel's rules never run", async () => {
    const connect = await chain.connect(requestInput({ clientIp: "192.0.2.7" }));
    expect(connect.verdict).toMatchObject({ kind: "close" });
    expect(connect.runs.map((r) => r.source)).toEqual(["operator"]);
    const request = await chain.request(signedIn("192.0.2.7"));
    expect(answered(request)?.status).toBe(403);
    expect(request.runs.map((r) => r.source)).toEqual(["operator"]);
  });

  test("the operator's authentication cannot be answered around: without the operator's password the tunnel's own answer is never given", async () => {
    const out = await chain.request(requestInput({ clientIp: "198.51.100.20" }));
    expect(answered(out)?.status).toBe(401);
    expect(out.runs.map((r) => r.source)).toEqual(["operator"]);
  });

  test("the server-wide rate limit holds whatever the tunnel's policy says", async () => {
    const ip = "198.51.100.21";
    expect(answered(await chain.request(signedIn(ip)))?.status).toBe(200);
    expect(answered(await chain.request(signedIn(ip)))?.status).toBe(200);
    const third = await chain.request(signedIn(ip));
    expect(answered(third)?.status).toBe(429);
    expect(third.runs.map((r) => r.source)).toEqual(["operator"]);
  });

  test("the visitor the operator let in stays who it is: the tunnel's own sign-in does not rename it", async () => {
    const out = await chain.request(signedIn("198.51.100.22"));
    expect(answered(out)?.body).toBe("the tunnel's own answer to ops");
    expect(out.identity).toBe("ops");
  });

  test("on a response the tunnel's layer runs first and the operator's last: its headers stand", async () => {
    const out = await chain.response(requestInput({ response: { status: 200, headers: [["Content-Type", "text/plain"]] } }));
    expect(out.runs.map((r) => r.source)).toEqual(["tunnel", "operator"]);
    const names = out.response!.headers.map(([n, v]) => `${n.toLowerCase()}: ${v}`);
    expect(names).toContain("strict-transport-security: max-age=63072000");
    expect(names).not.toContain("strict-transport-security: max-age=0");
    expect(names.some((h) => h.startsWith("x-powered-by"))).toBe(false);
  });
});
