/**
 * The server's caps on a traffic policy are its flags (docs/limits.md):
 * a policy within the defaults but over a lowered cap is refused where the
 * server loads it (POST /api/policies, a tunnel's HELLO) or stopped where
 * the edge runs it; a raised cap takes what the defaults refuse. Each
 * case is set beside what the engine does under the defaults, so that it
 * is the flag that made the difference.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { defaultServices, loadPolicy, RemoteKeySets, type PolicyError } from "../../src/policy/index.ts";
import { jwtValidation } from "../harness/jwt-policy.ts";
import { answered, policyOf, requestInput } from "../policy/policy-harness.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { withPolicy, type PolicyTunnel } from "./rig.ts";

/** A rule of `expressions`, which denies with `status`. */
const rule = (expressions: string[], status = 403) => ({ expressions, actions: [{ type: "deny", config: { status_code: status } }] });
const policy = (...rules: object[]) => JSON.stringify({ on_http_request: rules });

/** Its errors' codes under the engine's defaults (none: it loads). */
function defaultCodes(text: string): string[] {
  const out = loadPolicy(text);
  return Array.isArray(out) ? out.map((e: PolicyError) => e.code) : [];
}

/** The status the engine's defaults answer a request with `headers` (200: the rules let it on). */
async function defaultStatus(text: string, headers: [string, string][], target = "/"): Promise<number> {
  const out = await policyOf(text).run("on_http_request", requestInput({ headers, target }));
  return answered(out)?.status ?? 200;
}

/** A string the expression below makes from an `x-big` of `n` characters: n + 2n with `aa` (the size is paid before it is made). */
const GROW = (replacement: string) => `size(getReqHeader('x-big')[0].replace('a', '${replacement}')) > 0`;
const DEEP_JSON = "json.decode(getReqHeader('x-json')[0]).size() >= 0";
const nested = (depth: number) => `${"[".repeat(depth)}${"]".repeat(depth)}`;

describe("lowered caps", () => {
  // no literal prefix ("/?"): every position of the URL costs the search steps (regex.ts jumps to a literal one)
  const REWRITE = { expressions: ["req.url.path.startsWith('/rw/')"], actions: [{ type: "url-rewrite", config: { from: "/?rw/", to: "/done/" } }] };
  const RUNS = policy(rule([GROW("aa")], 403), rule([DEEP_JSON], 451), REWRITE);
  let t: PolicyTunnel;
  beforeAll(async () => {
    t = await withPolicy(RUNS, {
      server: {
        args: ["--policy-max-expressions", "1", "--policy-expression-max-length", "100", "--policy-log-metadata-max-depth", "1", "--policy-value-max-bytes", "1024", "--policy-json-max-depth", "2", "--policy-pattern-max-length", "100", "--policy-pattern-max-steps", "1000"],
      },
    });
  }, 30_000);
  afterAll(() => t?.close());

  test("--policy-max-expressions 1: a rule of two expressions is refused by POST /api/policies and at a tunnel's handshake", async () => {
    const two = policy(rule(["true", "true"]));
    expect(defaultCodes(two)).toEqual([]);
    const made = await t.api.post("/api/policies", { name: "two expressions", policy: two });
    expect(made.status).toBe(400);
    expect(made.body.error).toContain("[POLICY_LIMIT]");
    expect(made.body.error).toContain("a rule may have 1");
    const hello = await sayHello({ port: t.server.edgePort, via: "websocket", payload: jsonPayload({ version: PROTOCOL_VERSION, token: t.token, tunnels: [{ protocol: "http", policy: two }] }) });
    expect(hello.refusal?.code).toBe("POLICY_INVALID");
    expect(hello.refusal?.message).toContain("[POLICY_LIMIT]");
    expect((await t.api.post("/api/policies", { name: "one expression", scope: "hostname", hostname: "nothing.example.com", policy: policy(rule(["true"])) })).status).toBe(201);
  });

  test("--policy-expression-max-length 100: an expression of 105 characters is refused (CEL_TOO_COMPLEX)", async () => {
    const long = policy(rule([`'${"a".repeat(97)}' != ''`]));
    expect(defaultCodes(long)).toEqual([]);
    const made = await t.api.post("/api/policies", { name: "long", policy: long });
    expect(made.status).toBe(400);
    expect(made.body.error).toContain("[CEL_TOO_COMPLEX]");
    expect(made.body.error).toContain("longer than 100 characters");
  });

  test("--policy-log-metadata-max-depth 1: metadata two maps deep is refused, one map deep taken", async () => {
    const deep = policy({ actions: [{ type: "log", config: { metadata: { a: { b: { c: 1 } } } } }] });
    expect(defaultCodes(deep)).toEqual([]);
    const made = await t.api.post("/api/policies", { name: "deep log", policy: deep });
    expect(made.status).toBe(400);
    expect(made.body.error).toContain("deeper than 1 level");
    const one = policy({ actions: [{ type: "log", config: { metadata: { a: { b: 1 } } } }] });
    expect((await t.api.post("/api/policies", { name: "log", scope: "hostname", hostname: "log.example.com", policy: one })).status).toBe(201);
  });

  test("--policy-value-max-bytes 1024: on the edge, a string the defaults let an expression make fails it, and its rule does not match", async () => {
    const under = [["x-big", "a".repeat(300)]] as [string, string][]; // makes 900
    const over = [["x-big", "a".repeat(600)]] as [string, string][]; // makes 1,800
    expect(await defaultStatus(RUNS, over)).toBe(403);
    expect((await t.curl("/", ["-H", `x-big: ${under[0]![1]}`])).status).toBe(403);
    const past = await t.curl("/", ["-H", `x-big: ${over[0]![1]}`]);
    expect(past.status).toBe(200);
    expect(past.headers["x-from-service"]).toBe("yes");
  });

  test("--policy-json-max-depth 2: on the edge, json.decode of a text three levels deep fails, and its rule does not match", async () => {
    expect(await defaultStatus(RUNS, [["x-json", nested(3)]])).toBe(451);
    expect((await t.curl("/", ["-H", `x-json: ${nested(2)}`])).status).toBe(451);
    expect((await t.curl("/", ["-H", `x-json: ${nested(3)}`])).status).toBe(200);
  });

  test("--policy-pattern-max-length 100: a url-rewrite's pattern of 101 characters is refused", async () => {
    const long = policy({ actions: [{ type: "url-rewrite", config: { from: "a".repeat(101), to: "/" } }] });
    expect(defaultCodes(long)).toEqual([]);
    const made = await t.api.post("/api/policies", { name: "long pattern", policy: long });
    expect(made.status).toBe(400);
    expect(made.body.error).toContain("longer than 100 characters");
  });

  test("--policy-pattern-max-steps 1000: on the edge, a url-rewrite over a URL of 2,000 characters runs out of steps (400); a short one is rewritten", async () => {
    const long = `/rw/${"x".repeat(2000)}`;
    expect(await defaultStatus(RUNS, [], long)).toBe(200);
    const short = await t.curl("/rw/short");
    expect(short.status).toBe(200);
    expect(JSON.parse(short.body).path).toBe("/done/short");
    expect((await t.curl(long)).status).toBe(400);
  });
});

describe("raised caps", () => {
  /** 40,000 characters made 2,040,000: over the default 1 MiB, under 4 MiB, and 1,992 cost units. */
  const RUNS = policy(rule([GROW("a".repeat(50))], 403));
  let t: PolicyTunnel;
  beforeAll(async () => {
    t = await withPolicy(RUNS, { server: { args: ["--policy-max-expressions", "20", "--policy-expression-max-nodes", "5000", "--policy-value-max-bytes", "4194304"] } });
  }, 30_000);
  afterAll(() => t?.close());

  test("--policy-max-expressions 20: a rule of 17 expressions, refused by the defaults, is taken", async () => {
    const many = policy(rule(Array.from({ length: 17 }, () => "true")));
    expect(defaultCodes(many)).toEqual(["POLICY_LIMIT"]);
    const made = await t.api.post("/api/policies", { name: "many expressions", scope: "hostname", hostname: "many.example.com", policy: many });
    expect(made.status).toBe(201);
  });

  test("--policy-expression-max-nodes 5000: a literal list of 1,200 entries, refused by the defaults, is taken", async () => {
    const list = policy(rule([`[${Array(1200).fill("0").join(",")}].size() > 0`]));
    expect(defaultCodes(list)).toEqual(["CEL_TOO_COMPLEX"]);
    const made = await t.api.post("/api/policies", { name: "long list", scope: "hostname", hostname: "list.example.com", policy: list });
    expect(made.status).toBe(201);
  });

  test("--policy-value-max-bytes 4194304: on the edge, an expression makes a 2 MB string the defaults refuse, and its rule matches", async () => {
    const big = [["x-big", "a".repeat(40_000)]] as [string, string][];
    expect(await defaultStatus(RUNS, big)).toBe(200);
    expect((await t.curl("/", ["-H", `x-big: ${big[0]![1]}`])).status).toBe(403);
    expect((await t.curl("/")).status).toBe(200);
  });
});

describe("the server's JWKS fetch", () => {
  /** An issuer on loopback whose key set is four RSA keys (about 1.8 KB), and a token signed by the first. */
  let jwks: ReturnType<typeof Bun.serve>;
  let issuer: string;
  let jwt: string;
  let t: PolicyTunnel;
  beforeAll(async () => {
    const pairs = await Promise.all(Array.from({ length: 4 }, () => generateKeyPair("RS256")));
    const keys = await Promise.all(pairs.map(async (p, i) => ({ ...(await exportJWK(p.publicKey)), kid: `k${i}`, alg: "RS256", use: "sig" })));
    const body = JSON.stringify({ keys });
    expect(body.length).toBeGreaterThan(1024);
    jwks = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(body, { headers: { "content-type": "application/json" } }) });
    issuer = `http://127.0.0.1:${jwks.port}`;
    jwt = await new SignJWT({}).setProtectedHeader({ alg: "RS256", kid: "k0" }).setIssuer(issuer).setAudience("urn:api").setSubject("someone").setIssuedAt().setExpirationTime("10m").sign(pairs[0]!.privateKey);
    t = await withPolicy(`on_http_request:\n  - actions:\n${jwtValidation(issuer)}`, { server: { args: ["--oidc-http-issuers", "loopback", "--policy-jwks-max-bytes", "1024"] } });
  }, 30_000);
  afterAll(async () => {
    await t?.close();
    jwks?.stop(true);
  });

  test("--policy-jwks-max-bytes 1024: a key set the defaults read is not read, and its token is refused (401)", async () => {
    const services = defaultServices({ httpLoopback: true, keySets: new RemoteKeySets() });
    const out = await policyOf(`on_http_request:\n  - actions:\n${jwtValidation(issuer)}`, { services }).run("on_http_request", requestInput({ headers: [["Authorization", `Bearer ${jwt}`]] }));
    expect(out.verdict.kind).toBe("continue");
    const r = await t.curl("/", ["-H", `Authorization: Bearer ${jwt}`]);
    expect(r.status).toBe(401);
  });
});
