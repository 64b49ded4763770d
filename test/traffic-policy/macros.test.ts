/**
 * The JSON, query-string, URL, list, checksum and response-cookie macros on
 * a live tunnel: the real server, an agent run with the policy file, a
 * local service and curl; the macros in rule conditions and in `${...}`
 * interpolation, in both HTTP phases, and a run past its cost limit
 * answered 500 at the edge.
 */
import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { crc32, crc64Iso } from "../../src/policy/cel/checksums.ts";
import { echo, withPolicy, type Echoed } from "./rig.ts";

setDefaultTimeout(60_000);

const hex = (n: bigint, bytes: number) => n.toString(16).padStart(bytes * 2, "0");
const bytes = (s: string) => new TextEncoder().encode(s);

/** The echo, but /app/* answers with cookies set. */
async function service(req: Request): Promise<Response> {
  if (new URL(req.url).pathname.startsWith("/app")) {
    const headers = new Headers();
    headers.append("Set-Cookie", "session=abc; Path=/; HttpOnly");
    headers.append("Set-Cookie", "session=deep; Path=/app/deep; SameSite=Lax");
    headers.append("Set-Cookie", "theme=dark; Secure");
    return new Response("app", { headers });
  }
  return echo(req);
}

const POLICY = `on_http_request:
  - name: query says no
    expressions:
      - "hasQueryParam('deny') && queryString.decode(req.url.query)['deny'] == 'yes'"
    actions:
      - type: custom-response
        config: { status_code: 403, body: "denied \${hash.crc32(req.url.path)}" }
  - name: a budget only the request sizes
    expressions: ["hasReqHeader('x-n') && lists.range(int(getReqHeader('x-n')[0])).size() > 0"]
    actions: [{ type: add-headers, config: { headers: { x-ranged: "yes" } } }]
  - name: decoded lists
    expressions:
      - "hasReqHeader('x-list') && json.decode(getReqHeader('x-list')[0]).distinct().size() >= 2"
    actions:
      - type: add-headers
        config:
          headers:
            x-sorted: "\${json.decode(getReqHeader('x-list')[0]).sort().encodeJson()}"
            x-sorted-by: "\${json.encode(json.decode(getReqHeader('x-list')[0]).sortBy(s, -size(s)).slice(0, 2))}"
            x-crc64: "\${req.url.path.crc64()}"
            x-range: "\${lists.range(3).map(i, i * 2)}"
            x-flat: "\${[[1], [2, [3]]].flatten().size()}"
            x-host: "\${url.parse(req.url).hostname}"
            x-query: "\${queryString.encode({'b': 'x y', 'a': ['1', '2']})}"
on_http_response:
  - name: cookies
    expressions: ["hasResCookie('session') && !getResCookie('session').secure"]
    actions:
      - type: add-headers
        config:
          headers:
            x-session-path: "\${getResCookie('session').path}"
            x-cookie-names: "\${res.cookies.map(k, k).sort().encodeJson()}"
            x-theme-secure: "\${res.cookies['theme'][0].secure}"
`;

describe("the macros on a live tunnel", () => {
  test("in conditions and interpolation, in both phases; a run past its cost limit is a 500 at the edge", async () => {
    await using t = await withPolicy(POLICY, { upstream: service });

    const denied = await t.curl("/some/where?deny=yes");
    expect(denied.status).toBe(403);
    expect(denied.body).toBe(`denied ${hex(crc32(bytes("/some/where")), 4)}`);
    expect((await t.curl("/some/where?deny=no")).status).toBe(200);

    const listed = await t.curl("/p?q=1", ["-H", 'x-list: ["bb","a","ccc","a"]']);
    expect(listed.status).toBe(200);
    const seen = (JSON.parse(listed.body) as Echoed).headers;
    expect(seen["x-sorted"]).toBe('["a","a","bb","ccc"]');
    expect(seen["x-sorted-by"]).toBe('["ccc","bb"]');
    expect(seen["x-crc64"]).toBe(hex(crc64Iso(bytes("/p")), 8));
    expect(seen["x-range"]).toBe("[0,2,4]");
    expect(seen["x-flat"]).toBe("3");
    expect(seen["x-host"]).toBe(new URL(t.url("/")).host.split(":")[0]!);
    expect(seen["x-query"]).toBe("a=1&a=2&b=x+y");
    // one distinct value: the rule does not match; not JSON: an error, the rule does not match either
    expect((JSON.parse((await t.curl("/p", ["-H", 'x-list: ["a","a"]'])).body) as Echoed).headers["x-sorted"]).toBeUndefined();
    expect((await t.curl("/p", ["-H", "x-list: {nope"])).status).toBe(200);

    const app = await t.curl("/app/deep/page");
    expect(app.status).toBe(200);
    expect(app.headers["x-session-path"]).toBe("/app/deep");
    expect(app.headers["x-cookie-names"]).toBe('["session","theme"]');
    expect(app.headers["x-theme-secure"]).toBe("true");
    expect((await t.curl("/elsewhere")).headers["x-session-path"]).toBeUndefined();

    expect((JSON.parse((await t.curl("/r", ["-H", "x-n: 20"])).body) as Echoed).headers["x-ranged"]).toBe("yes");
    expect((await t.curl("/r", ["-H", "x-n: 99999"])).status).toBe(500);
  });

  test("a policy calling one wrongly is refused when the agent loads it, with the rule and the column", async () => {
    const err = await withPolicy(`on_http_request:\n  - expressions: ["[[1]].sort().size() > 0"]\n    actions: [{ type: deny }]\n`).then(
      async (t) => {
        await t.close();
        return undefined;
      },
      (e: Error) => e,
    );
    expect(String(err)).toContain("policy.yml:2:25: sort() needs elements that can be ordered, not list(int)s (rule #1) [CEL_TYPE]");
  });
});
