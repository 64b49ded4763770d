/**
 * The access rules as units: the settings' checks and their codes, basic
 * auth's constant-time compare, IP rules over both families, header rules,
 * and the agent's guard against a server that would drop its rules.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { unenforcedAccess } from "../../src/agent/access.ts";
import { checkAccess } from "../../src/core/access.ts";
import { hasAuthentication, hasRules } from "../../src/validate/access.ts";
import { BasicAuth, matchesAnyDigest } from "../../src/edge/access/basic-auth.ts";
import { HeaderRules } from "../../src/edge/access/header-rules.ts";
import { IpRules } from "../../src/edge/access/ip-rules.ts";
import { AccessPolicy } from "../../src/edge/access/policy.ts";
import { WorkingRequest } from "../../src/policy/message.ts";

const sha = (s: string) => createHash("sha256").update(s).digest();

describe("basic auth", () => {
  test("the compare looks at every digest whether the match is first, last or absent (no early exit)", () => {
    const digests = ["a:1", "b:2", "c:3"].map(sha);
    for (const [presented, want] of [
      ["a:1", true],
      ["c:3", true],
      ["c:4", false],
      ["", false],
      ["x".repeat(10_000), false],
    ] as const) {
      let reads = 0;
      const counted = new Proxy(digests, {
        get(target, key, receiver) {
          if (typeof key === "string" && /^\d+$/.test(key)) reads++;
          return Reflect.get(target, key, receiver);
        },
      });
      expect(matchesAnyDigest(presented, counted)).toBe(want);
      expect(reads).toBe(digests.length);
    }
  });

  test("digests of equal length are compared whatever the length of what was sent", () => {
    // timingSafeEqual throws on unequal lengths: a short or long guess must still be compared, not thrown out early
    expect(() => matchesAnyDigest("a", [sha("a-much-longer-credential:with-a-password")])).not.toThrow();
  });

  test("the header: the right pair's user, nothing for a wrong one, a bad scheme or bad base64", () => {
    const auth = new BasicAuth([{ user: "alice", password: "p:w" }], "demo");
    expect(auth.check(`Basic ${btoa("alice:p:w")}`)).toBe("alice");
    expect(auth.check(`basic   ${btoa("alice:p:w")}`)).toBe("alice");
    expect(auth.check(`Basic ${btoa("alice:p:x")}`)).toBeUndefined();
    expect(auth.check(`Bearer ${btoa("alice:p:w")}`)).toBeUndefined();
    expect(auth.check("Basic !!!")).toBeUndefined();
    expect(auth.check(null)).toBeUndefined();
    expect(auth.challenge).toBe('Basic realm="demo", charset="UTF-8"');
  });
});

describe("IP rules", () => {
  test("every non-empty allow list must hold the address, and deny wins", () => {
    const rules = new IpRules([["10.0.0.0/8", "::1"], ["10.1.0.0/16", "::1"]], ["10.1.2.3"]);
    expect(rules.allows("10.1.0.1")).toBe(true);
    expect(rules.allows("10.2.0.1")).toBe(false); // not in the user's list
    expect(rules.allows("10.1.2.3")).toBe(false); // denied
    expect(rules.allows("::1")).toBe(true);
    expect(rules.allows("::ffff:10.1.0.1")).toBe(true); // an IPv4 visitor on a dual-stack socket
    expect(rules.allows("not-an-address")).toBe(false);
  });

  test("deny only: everyone else gets in; IPv6 ranges; IPv4-mapped ranges are IPv4", () => {
    const rules = new IpRules([], ["2001:db8::/32", "::ffff:192.168.0.0/112"]);
    expect(rules.allows("2001:db8::5")).toBe(false);
    expect(rules.allows("2001:db9::5")).toBe(true);
    expect(rules.allows("192.168.7.7")).toBe(false);
    expect(rules.allows("192.169.0.1")).toBe(true);
    expect(new IpRules([[], []], []).empty).toBe(true);
  });
});

describe("header rules", () => {
  test("set replaces the visitor's header of that name; remove removes; response set replaces the service's", () => {
    const rules = new HeaderRules({ requestAdd: [["X-Team", "blue"]], requestRemove: ["Cookie"], responseAdd: [["X-Frame-Options", "DENY"]] });
    const req: [string, string][] = [
      ["x-team", "forged"],
      ["cookie", "a=b"],
      ["accept", "*/*"],
    ];
    rules.rewriteRequest(req);
    expect(req).toEqual([
      ["accept", "*/*"],
      ["x-team", "blue"],
    ]);
    expect(rules.rewriteResponse([["X-Frame-Options", "SAMEORIGIN"], ["content-type", "text/plain"]])).toEqual([
      ["content-type", "text/plain"],
      ["x-frame-options", "DENY"],
    ]);
  });
});

describe("the settings' checks", () => {
  test("codes for each kind of mistake, and no secret in any message", () => {
    const secret = "hunter2-secret";
    const cases: [Parameters<typeof checkAccess>[0], string | undefined][] = [
      [{ allowCidrs: ["10.0.0.0/8", "fe80::/10"], denyCidrs: ["1.2.3.4"] }, undefined],
      [{ allowCidrs: ["10.0.0.0/99"] }, "CIDR_INVALID"],
      [{ basicAuth: [{ user: "", password: secret }] }, "BASIC_AUTH_INVALID"],
      [{ basicAuth: [{ user: "a:b", password: secret }] }, "BASIC_AUTH_INVALID"],
      [{ requestHeaderAdd: [["X-Key", `${secret}\n`]] }, "HEADER_RULE_INVALID"],
      [{ requestHeaderRemove: ["X-Forwarded-For"] }, "HEADER_RULE_INVALID"],
      [{ responseHeaderAdd: [["Bad Name", "v"]] }, "HEADER_RULE_INVALID"],
      [{ oidc: { issuer: "https://id.example.com", clientId: "", clientSecret: secret } }, "OIDC_INVALID"],
      [{ oidc: { issuer: "https://id.example.com?x=1", clientId: "a", clientSecret: secret } }, "OIDC_INVALID"],
      [{ oidc: { issuer: "http://127.0.0.1:8080", clientId: "a", clientSecret: secret, allowEmails: ["@example.com", "a@b.org"] } }, undefined],
      [{ basicAuth: [{ user: "a", password: secret }], oidc: { issuer: "https://id.example.com", clientId: "a", clientSecret: secret } }, "OIDC_INVALID"],
    ];
    for (const [access, code] of cases) {
      const err = checkAccess(access);
      expect(err?.code).toBe(code as never);
      expect(err?.message ?? "").not.toContain(secret);
    }
  });

  test("what counts as authentication (require_auth) and as rules at all", () => {
    expect(hasAuthentication({ basicAuth: [{ user: "a", password: "b" }] })).toBe(true);
    expect(hasAuthentication({ oidc: { issuer: "https://x.example", clientId: "a", clientSecret: "b" } })).toBe(true);
    expect(hasAuthentication({ basicAuth: [], allowCidrs: ["10.0.0.0/8"] })).toBe(false);
    expect(hasRules({ basicAuth: [], allowCidrs: [] })).toBe(false);
    expect(hasRules({ denyCidrs: ["::1"] })).toBe(true);
  });

  test("a tunnel without rules compiles to no policy (the hot path's one property read)", () => {
    expect(AccessPolicy.compile({ name: "x" })).toBeUndefined();
    expect(AccessPolicy.compile({ name: "x", asked: { allowCidrs: [] }, userAllowCidrs: [] })).toBeUndefined();
    expect(AccessPolicy.compile({ name: "x", userAllowCidrs: ["10.0.0.0/8"] })?.refusesAddress("11.0.0.1")).toBe(true);
  });
});

describe("an older server that drops the rules", () => {
  const asked = [
    { name: "web", request: { protocol: "http" as const, access: { basicAuth: [{ user: "a", password: "b" }] } } },
    { name: "plain", request: { protocol: "http" as const } },
  ];
  const grant = (index: number, access?: boolean) => ({ id: String(index), protocol: "http" as const, url: "http://x", index, ...(access ? { access } : {}) });

  test("a tunnel with rules granted without `access: true` ends the session, naming it", () => {
    expect(unenforcedAccess(asked, { session: "s", username: "u", tunnels: [grant(0), grant(1)] })?.message).toContain("tunnel 'web' is not served unprotected");
  });

  test("granted with it, or refused, or without rules: nothing to say", () => {
    expect(unenforcedAccess(asked, { session: "s", username: "u", tunnels: [grant(0, true), grant(1)] })).toBeUndefined();
    expect(unenforcedAccess(asked, { session: "s", username: "u", tunnels: [grant(1)], refused: [{ index: 0, code: "X", message: "m" }] })).toBeUndefined();
  });
});

describe("basic auth guesses", () => {
  const policy = () => AccessPolicy.compile({ asked: { basicAuth: [{ user: "u", password: "right-one" }] }, name: "guessed" })!;
  const ask = (p: AccessPolicy, client: string, cred?: string) => {
    const headers: Record<string, string> = cred === undefined ? {} : { Authorization: `Basic ${btoa(cred)}` };
    return askFlags(p, client, headers);
  };
  const status = (r: { status: number }) => r.status;

  test("ten wrong passwords from one address, then it is refused unheard (429, Retry-After), even with the right one", async () => {
    const p = policy();
    for (let i = 0; i < 10; i++) expect(status(await ask(p, "203.0.113.9", `u:guess-${i}`))).toBe(401);
    const locked = await ask(p, "203.0.113.9", "u:right-one");
    expect(status(locked)).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    // another address is not hindered
    expect(status(await ask(p, "203.0.113.10", "u:right-one"))).toBe(200);
  });

  test("an IPv6 client is counted by its /64: moving to another address in it does not start afresh", async () => {
    const p = policy();
    for (let i = 0; i < 10; i++) expect(status(await ask(p, `2001:db8:1:2::${(i + 1).toString(16)}`, `u:guess-${i}`))).toBe(401);
    expect(status(await ask(p, "2001:db8:1:2:ffff::1", "u:right-one"))).toBe(429);
    expect(status(await ask(p, "2001:db8:1:3::1", "u:right-one"))).toBe(200);
  });

  test("requests without credentials (a browser's first visit) are not guesses", async () => {
    const p = policy();
    for (let i = 0; i < 50; i++) expect(status(await ask(p, "203.0.113.11"))).toBe(401);
    expect(status(await ask(p, "203.0.113.11", "u:right-one"))).toBe(200);
  });

  test("the lock ends: after it the address may try again", () => {
    let t = 1_000_000;
    const basic = new BasicAuth([{ user: "u", password: "p" }], "r", () => t);
    for (let i = 0; i < 10; i++) expect(basic.judge("198.51.100.1", `Basic ${btoa("u:wrong")}`)).toEqual({ passed: false });
    expect(basic.judge("198.51.100.1", `Basic ${btoa("u:p")}`)).toEqual({ retryAt: t + 60_000 });
    t += 60_001;
    expect(basic.judge("198.51.100.1", `Basic ${btoa("u:p")}`)).toEqual({ passed: true });
  });
});

/** A request to `/` judged by the tunnel's flags layer as the edge runs it: the answer it gives, or 200 for passed. */
async function askFlags(p: AccessPolicy, client: string, fields: Record<string, string>): Promise<{ status: number; headers: Headers }> {
  const now = Date.now();
  const host = "guessed.localhost";
  const facts = { method: "GET", target: "/", scheme: "http", host, headers: Object.entries(fields).map(([k, v]) => [k.toLowerCase(), v] as [string, string]) } as const;
  const out = await p.flags!.runFrom(
    "on_http_request",
    { conn: { clientIp: client, clientPort: 0, serverPort: 0, openedAt: now }, endpoint: { host, port: 0, protocol: "http", url: `http://${host}` }, tunnel: { name: "guessed", kind: "http", user: "" }, request: facts, now },
    { request: new WorkingRequest(facts, now) },
  );
  if (out.verdict.kind !== "respond") return { status: 200, headers: new Headers() };
  return { status: out.verdict.response.status, headers: new Headers(out.verdict.response.headers) };
}
