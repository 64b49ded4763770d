/**
 * The response's cookies: getResCookie, hasResCookie and res.cookies, read
 * from the Set-Cookie fields as ngrok's cookie struct (name, value, path,
 * domain, expires, max_age, secure, http_only, same_site,
 * unparsed_attributes), several of one name by their path's length,
 * the longest first; on_http_response only, refused elsewhere at load.
 */
import { describe, expect, test } from "bun:test";
import { parseSetCookie } from "../../src/policy/set-cookie.ts";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";
import { errorOf, refusalOf, valueOf } from "./macro-harness.ts";

const response = (...cookies: string[]) => ({ phase: "on_http_response" as const, request: { response: { status: 200, headers: cookies.map((c) => ["Set-Cookie", c] as [string, string]) } } });
const ZERO_TIME = { seconds: -62135596800n, nanos: 0 };

describe("the cookie struct", () => {
  test("every attribute, as ngrok names them", () => {
    const r = response("_device_id=mobile-phone-14; Path=/app; Domain=example.com; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Max-Age=3600; Secure; HttpOnly; SameSite=strict; Priority=High; Partitioned");
    expect(valueOf("getResCookie('_device_id')", r)).toEqual({
      name: "_device_id",
      value: "mobile-phone-14",
      path: "/app",
      domain: "example.com",
      expires: { seconds: BigInt(Date.UTC(2037, 9, 21, 7, 28) / 1000), nanos: 0 },
      max_age: { seconds: 3600n, nanos: 0 },
      secure: true,
      http_only: true,
      same_site: "Strict",
      unparsed_attributes: { Priority: "High", Partitioned: "" },
    });
    expect(valueOf("getResCookie('_device_id').value == 'mobile-phone-14'", r)).toBe(true);
    expect(valueOf("getResCookie('_device_id').max_age > duration('30m') && getResCookie('_device_id').expires > timestamp('2030-01-01T00:00:00Z')", r)).toBe(true);
  });

  test("absent attributes as Go's http.Cookie has them: the zero time, 0s; Max-Age=0 is -1s; an unreadable Expires the zero time; quotes off the value", () => {
    expect(valueOf("getResCookie('a')", response('a="quoted"'))).toMatchObject({ value: "quoted", path: "", domain: "", expires: ZERO_TIME, max_age: { seconds: 0n }, secure: false, http_only: false, same_site: "" });
    expect(valueOf("getResCookie('a').max_age", response("a=1; Max-Age=0"))).toEqual({ seconds: -1n, nanos: 0 });
    expect(valueOf("getResCookie('a').expires", response("a=1; Expires=someday"))).toEqual(ZERO_TIME);
    expect(valueOf("getResCookie('a').same_site", response("a=1; SameSite=Bogus"))).toBe("");
    expect(parseSetCookie("no equals sign")).toBeUndefined();
    expect(parseSetCookie("bad name=1")).toBeUndefined();
  });
});

describe("getResCookie, hasResCookie, res.cookies", () => {
  test("several of one name: the longest path first; getResCookie gives that one", () => {
    const r = response("sid=short; Path=/", "other=1", "sid=long; Path=/a/long/path", "sid=mid; Path=/a");
    expect(valueOf("getResCookie('sid').value", r)).toBe("long");
    expect(valueOf("res.cookies['sid'].map(c, c.value)", r)).toEqual(["long", "mid", "short"]);
    expect(valueOf("size(res.cookies)", r)).toBe(2n);
    expect(valueOf("res.cookies['other'][0].name", r)).toBe("other");
  });

  test("presence; an absent cookie is an error for getResCookie (the rule does not match), as getReqCookie's", () => {
    const r = response("sid=1");
    expect(valueOf("hasResCookie('sid') && !hasResCookie('SID') && !hasResCookie('nope')", r)).toBe(true);
    expect(errorOf("getResCookie('nope')", r)).toContain("no cookie named 'nope'");
    expect(valueOf("size(res.cookies) == 0 && !hasResCookie('sid')", response())).toBe(true);
  });

  test("the request's Cookie header is not the response's cookies", () => {
    const r = { phase: "on_http_response" as const, request: { headers: [["Cookie", "sid=1"]] as [string, string][], response: { status: 200 } } };
    expect(valueOf("!hasResCookie('sid') && hasReqCookie('sid')", r)).toBe(true);
  });

  test("refused at load outside on_http_response, as getResHeader is; a wrong argument type refused", () => {
    for (const text of ["hasResCookie('sid')", "getResCookie('sid').value == 'x'", "size(res.cookies) > 0"]) {
      for (const phase of ["on_http_request", "on_tcp_connect"] as const) {
        const out = refusalOf(text, { phase });
        expect(out.refused).toMatch(/not available in on_(http_request|tcp_connect) \(only in on_http_response, on_event_stream_message\)/);
      }
    }
    const [e] = errorsOf(`on_http_request:\n  - expressions: ["hasResCookie('sid')"]\n    actions: [{ type: deny }]\n`);
    expect(e).toMatchObject({ code: "CEL_TYPE" });
    expect(refusalOf("hasResCookie(1)", { phase: "on_http_response" }).refused).toContain("found no matching overload");
  });

  test("a response rule matches on them", async () => {
    const p = policyOf(`on_http_response:
  - expressions: ["hasResCookie('session') && !getResCookie('session').secure"]
    actions: [{ type: custom-response, config: { status_code: 500, body: "insecure cookie" } }]
`);
    const run = (cookie: string) => p.run("on_http_response", requestInput({ response: { status: 200, headers: [["Set-Cookie", cookie]] } }));
    expect((await run("session=1; Path=/")).verdict.kind).toBe("respond");
    expect((await run("session=1; Path=/; Secure")).verdict.kind).not.toBe("respond");
  });
});
