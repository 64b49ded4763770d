/**
 * The actions that decide who gets in, as today's flags decide it (the
 * flags are to become these actions): restrict-ips (--allow-cidr,
 * --deny-cidr, a user's allow_cidrs), basic-auth (--basic-auth with its
 * guess throttle), and rate-limit with its sliding window, its 429 and
 * Retry-After, its buckets and its store.
 */
import { describe, expect, test } from "bun:test";
import { defaultServices, MemoryRateLimitStore, type RateLimitStore } from "../../src/policy/index.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

describe("restrict-ips", () => {
  const p = policyOf(`
on_tcp_connect:
  - actions:
      - type: restrict-ips
        config: { allow: [10.0.0.0/8, "2001:db8::/32"], deny: [10.6.6.0/24] }
on_http_request:
  - actions:
      - type: restrict-ips
        config: { allow: [10.0.0.0/8, "2001:db8::/32"], deny: [10.6.6.0/24] }
`);

  test("allowed when in an allow entry and in no deny entry; deny wins; IPv4-mapped IPv6 is its IPv4 self", async () => {
    for (const ip of ["10.1.2.3", "2001:db8::1", "::ffff:10.1.2.3"]) expect((await p.run("on_http_request", requestInput({ clientIp: ip }))).verdict.kind).toBe("continue");
    for (const ip of ["10.6.6.6", "192.0.2.1", "2001:db9::1", "::ffff:10.6.6.1"]) {
      const out = await p.run("on_http_request", requestInput({ clientIp: ip }));
      expect(answered(out)?.status).toBe(403);
    }
  });

  test("in on_tcp_connect a refused address's connection is closed", async () => {
    expect((await p.run("on_tcp_connect", requestInput({ clientIp: "192.0.2.1" }))).verdict.kind).toBe("close");
    expect((await p.run("on_tcp_connect", requestInput({ clientIp: "10.0.0.1" }))).verdict.kind).toBe("continue");
  });

  test("several allow lists must all hold, as --allow-cidr and a user's allow_cidrs together do: one action each", async () => {
    const two = policyOf(`
on_http_request:
  - actions:
      - type: restrict-ips
        config: { allow: [10.0.0.0/8] }
      - type: restrict-ips
        config: { allow: [10.1.0.0/16] }
`);
    expect((await two.run("on_http_request", requestInput({ clientIp: "10.1.0.5" }))).verdict.kind).toBe("continue");
    expect(answered(await two.run("on_http_request", requestInput({ clientIp: "10.2.0.5" })))?.status).toBe(403);
  });

  test("entries are checked at load (with their line), interpolated ones as the request comes (a bad one is ignored and told)", async () => {
    const [e] = errorsOf(`on_http_request:\n  - actions:\n      - type: restrict-ips\n        config:\n          allow: [10.0.0.0/8, not-a-cidr]\n`);
    expect(e).toMatchObject({ code: "ACTION_CONFIG", line: 5, path: "on_http_request[0].actions[0].config.allow[1]" });
    const dynamic = policyOf(`
on_http_request:
  - actions:
      - type: restrict-ips
        config: { allow: ["\${req.headers['x-allow'][0]}"] }
`);
    expect((await dynamic.run("on_http_request", requestInput({ clientIp: "10.1.1.1", headers: [["X-Allow", "10.0.0.0/8"]] }))).verdict.kind).toBe("continue");
    const bad = await dynamic.run("on_http_request", requestInput({ clientIp: "10.1.1.1", headers: [["X-Allow", "nonsense"]] }));
    expect(answered(bad)?.status).toBe(403);
    expect(bad.problems.map((x) => x.message).join()).toContain("not an address");
  });

  test("ngrok's ip_policies are refused with what to write instead", () => {
    const [e] = errorsOf(`on_http_request:\n  - actions:\n      - type: restrict-ips\n        config: { ip_policies: [ipp_123] }\n`);
    expect(e!.message).toContain("list their CIDRs");
  });
});

describe("basic-auth", () => {
  const yaml = `
on_http_request:
  - actions:
      - type: basic-auth
        config:
          credentials: ["alice:correct horse", "bob:s3cret:with:colons"]
      - type: custom-response
        config: { body: "hello \${visitor.identity} \${actions.ngrok.basic_auth.credentials.username}" }
`;

  test("no credentials: 401 with the browser's prompt (realm: the tunnel); right ones: in, as that user", async () => {
    const p = policyOf(yaml);
    const none = answered(await p.run("on_http_request", requestInput()))!;
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toBe('Basic realm="app", charset="UTF-8"');
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["Authorization", basic("alice", "correct horse")]] })))?.body).toBe("hello alice alice");
    // the first colon splits: bob's password has colons in it
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["Authorization", basic("bob", "s3cret:with:colons")]] })))?.body).toBe("hello bob bob");
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["Authorization", basic("alice", "wrong")]] })))?.status).toBe(401);
  });

  test("the password goes no further than the edge: Authorization is taken off the forwarded request", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: basic-auth
        config: { credentials: ["alice:pw"] }
`);
    const out = await p.run("on_http_request", requestInput({ headers: [["authorization", basic("alice", "pw")]] }));
    expect(out.verdict.kind).toBe("continue");
    expect(out.identity).toBe("alice");
    expect(out.request!.headers.some(([n]) => n.toLowerCase() === "authorization")).toBe(false);
  });

  test("wrong passwords are counted per address: past the limit 429 with Retry-After, even for the right one, other addresses unhindered", async () => {
    let now = 1_000_000;
    const services = defaultServices({ now: () => now, basicAuthLimit: 3 });
    const p = policyOf(yaml, { services });
    const from = (ip: string, auth: string) => p.run("on_http_request", requestInput({ clientIp: ip, headers: [["Authorization", auth]] }));
    for (let i = 0; i < 3; i++) expect(answered(await from("198.51.100.1", basic("alice", `guess${i}`)))?.status).toBe(401);
    const locked = answered(await from("198.51.100.1", basic("alice", "correct horse")))!;
    expect(locked.status).toBe(429);
    expect(Number(locked.headers["retry-after"])).toBeGreaterThan(0);
    // another address is not hindered
    expect(answered(await from("198.51.100.2", basic("alice", "correct horse")))?.body).toBe("hello alice alice");
    now += 61_000;
    expect(answered(await from("198.51.100.1", basic("alice", "correct horse")))?.body).toBe("hello alice alice");
  });

  test("enforce: false lets the request go on, unidentified, and says so in its variables", async () => {
    const p = policyOf(`
on_http_request:
  - actions:
      - type: basic-auth
        config: { credentials: ["a:b"], enforce: false }
      - type: custom-response
        config: { body: "\${actions.ngrok.basic_auth.credentials.authorized} '\${visitor.identity}'" }
`);
    expect(answered(await p.run("on_http_request", requestInput()))?.body).toBe("false ''");
  });

  test("a credential without a colon or with an empty password is refused at load, the password never quoted", () => {
    const errors = errorsOf(`on_http_request:\n  - actions:\n      - type: basic-auth\n        config: { credentials: ["nocolonsecret", "carol:", 12345678] }\n`);
    const text = JSON.stringify(errors);
    expect(errors.length).toBeGreaterThan(0);
    expect(text).not.toContain("nocolonsecret");
    expect(text).not.toContain("12345678");
  });
});

describe("rate-limit", () => {
  const yaml = (extra = "") => `
on_http_request:
  - actions:
      - type: rate-limit
        config:
          name: per client
          algorithm: sliding_window
          capacity: 3
          rate: 60s
          bucket_key: [conn.client_ip${extra}]
`;

  test("capacity requests per window pass; the next gets 429 with Retry-After; other buckets are apart", async () => {
    let now = 6_000_000;
    const p = policyOf(yaml(), { services: defaultServices({ now: () => now }) });
    const from = (ip: string) => p.run("on_http_request", requestInput({ clientIp: ip, now }));
    for (let i = 0; i < 3; i++) expect((await from("192.0.2.1")).verdict.kind).toBe("continue");
    const limited = answered(await from("192.0.2.1"))!;
    expect(limited.status).toBe(429);
    const retry = Number(limited.headers["retry-after"]);
    expect(retry).toBeGreaterThan(0);
    expect(retry).toBeLessThanOrEqual(120);
    expect((await from("192.0.2.2")).verdict.kind).toBe("continue");
    // the window slides: after two windows the bucket is empty again
    now += 120_000;
    expect((await from("192.0.2.1")).verdict.kind).toBe("continue");
  });

  test("the window slides: after half a window, half of the last window's count still weighs", async () => {
    const store = new MemoryRateLimitStore();
    const w = 60_000;
    const t0 = 10 * w;
    for (let i = 0; i < 4; i++) expect(store.hit("k", 4, w, t0 + 1000).limited).toBe(false);
    expect(store.hit("k", 4, w, t0 + 2000).limited).toBe(true);
    // half into the next window: 4 * 0.5 + 0 = 2 counted, so two more fit and the third does not
    expect(store.hit("k", 4, w, t0 + w + w / 2).limited).toBe(false);
    expect(store.hit("k", 4, w, t0 + w + w / 2).limited).toBe(false);
    expect(store.hit("k", 4, w, t0 + w + w / 2).limited).toBe(true);
  });

  test("concurrent requests are each counted when judged: of 20 at once with capacity 3, exactly 3 pass", async () => {
    const p = policyOf(yaml());
    const outs = await Promise.all(Array.from({ length: 20 }, () => p.run("on_http_request", requestInput({ clientIp: "192.0.2.9" }))));
    expect(outs.filter((o) => o.verdict.kind === "continue")).toHaveLength(3);
  });

  test("bucket keys together: a header and the address; a missing header is one bucket of its own, told", async () => {
    const p = policyOf(yaml(", \"req.headers['x-api-key'][0]\""));
    const run = (key?: string) => p.run("on_http_request", requestInput({ clientIp: "192.0.2.3", headers: key ? [["X-Api-Key", key]] : [] }));
    for (let i = 0; i < 3; i++) expect((await run("a")).verdict.kind).toBe("continue");
    expect(answered(await run("a"))?.status).toBe(429);
    expect((await run("b")).verdict.kind).toBe("continue");
    const missing = await run();
    expect(missing.verdict.kind).toBe("continue");
    expect(missing.problems[0]!.message).toContain("bucket_key");
  });

  test("enforce: false only records actions.ngrok.rate_limit.limited; on_tcp_connect closes", async () => {
    const p = policyOf(`
on_tcp_connect:
  - actions:
      - type: rate-limit
        config: { name: conns, algorithm: sliding_window, capacity: 1, rate: 10s, bucket_key: [conn.client_ip] }
on_http_request:
  - actions:
      - type: rate-limit
        config: { name: soft, algorithm: sliding_window, capacity: 1, rate: 10s, bucket_key: [conn.client_ip], enforce: false }
      - type: add-headers
        config: { headers: { x-limited: "\${actions.ngrok.rate_limit.limited}" } }
`);
    const first = await p.run("on_http_request", requestInput());
    const second = await p.run("on_http_request", requestInput());
    expect(first.request!.headers).toContainEqual(["x-limited", "false"]);
    expect(second.request!.headers).toContainEqual(["x-limited", "true"]);
    expect((await p.run("on_tcp_connect", requestInput())).verdict.kind).toBe("continue");
    expect((await p.run("on_tcp_connect", requestInput())).verdict.kind).toBe("close");
  });

  test("the counts live in the store the edge gives (an interface: the database's later), keyed by policy and action", async () => {
    const seen: string[] = [];
    const store: RateLimitStore = {
      async hit(bucket) {
        seen.push(bucket);
        return { limited: seen.length > 1, retryAfterMs: 5000, remaining: 0 };
      },
    };
    const p = policyOf(yaml(), { services: defaultServices({ rateLimits: store }), key: "operator/server-wide" });
    expect((await p.run("on_http_request", requestInput())).verdict.kind).toBe("continue");
    const limited = answered(await p.run("on_http_request", requestInput()))!;
    expect(limited.headers["retry-after"]).toBe("5");
    expect(seen[0]).toStartWith("operator/server-wide/on_http_request/0/0\0per client\0");
    // the bucket's value is digested: a long header value does not make a long key
    expect(seen[0]!.length).toBeLessThan(120);
  });

  test("a rate that is no duration, or out of 1s..24h, is refused at load", () => {
    for (const rate of ["soon", "0s", "48h"]) {
      const [e] = errorsOf(yaml().replace("rate: 60s", `rate: ${rate}`));
      expect(e).toMatchObject({ code: "ACTION_CONFIG", path: "on_http_request[0].actions[0].config.rate" });
    }
  });

  test("the memory store forgets the least recently used bucket past its cap", () => {
    const store = new MemoryRateLimitStore(3);
    for (const k of ["a", "b", "c", "d"]) store.hit(k, 1, 1000, 0);
    expect(store.size).toBe(3);
    expect(store.hit("a", 1, 1000, 1).limited).toBe(false); // forgotten: counted afresh
    expect(store.hit("d", 1, 1000, 1).limited).toBe(true);
  });
});
