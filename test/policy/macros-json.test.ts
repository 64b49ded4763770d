/**
 * ngrok's JSON, query-string and URL macros: json.encode/decode and the
 * encodeJson/decodeJson methods, queryString.encode/decode and the
 * encodeQueryString/decodeQueryString/isQueryString methods, url.parse
 * and parseUrl: ngrok's documented examples, their errors, the refusals
 * at load, and the cost bound (a deep or huge JSON text, a big query).
 */
import { describe, expect, test } from "bun:test";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";
import { errorOf, refusalOf, valueOf } from "./macro-harness.ts";

describe("json", () => {
  test("ngrok's examples: decode to a map or a list, encode a map or a list (Go's order: keys sorted)", () => {
    expect(valueOf(`json.decode('{"a":"b"}')`)).toEqual({ a: "b" });
    expect(valueOf(`json.decode('["a","b","c"]')`)).toEqual(["a", "b", "c"]);
    expect(valueOf(`json.decode(getReqHeader('x-json-array')[0])[0] == "first entry"`, { request: { headers: [["x-json-array", '["first entry", 2]']] } })).toBe(true);
    expect(valueOf(`json.encode({'b': 1, 'a': [true, null, 2.5, 'x']})`)).toBe('{"a":[true,null,2.5,"x"],"b":1}');
    expect(valueOf(`json.encode(["a","b","c"])`)).toBe('["a","b","c"]');
    expect(valueOf(`json.encode(req.content_type.parameters) == '{"charset":"UTF-8"}'`, { request: { headers: [["content-type", "text/plain; charset=UTF-8"]] } })).toBe(true);
    expect(valueOf(`["a","b","c"].encodeJson()`)).toBe('["a","b","c"]');
    expect(valueOf(`{'a':"b",'c':"d"}.encodeJson()`)).toBe('{"a":"b","c":"d"}');
    expect(valueOf(`'{"a":"b"}'.decodeJson()`)).toEqual({ a: "b" });
  });

  test("JSON numbers are doubles, as Go decodes them; a scalar text decodes to its value; encode(decode(x)) keeps it", () => {
    expect(valueOf(`json.decode('{"n": 1}').n == 1.0`)).toBe(true);
    expect(valueOf(`type(json.decode('[1]')[0]) == double`)).toBe(true);
    expect(valueOf(`json.decode('"s"')`)).toBe("s");
    expect(valueOf(`json.encode(json.decode('{"z":{"y":[1,{"x":null}]},"a":"\\\\u00e9"}'))`)).toBe('{"a":"é","z":{"y":[1,{"x":null}]}}');
    expect(valueOf(`json.encode([b'hi', 1u, -2])`)).toBe('["aGk=",1,-2]');
  });

  test("not JSON, a double that JSON has no words for: errors; a wrong argument type: refused at load", () => {
    expect(errorOf(`json.decode('{nope')`)).toContain("not JSON");
    expect(errorOf(`'nope'.decodeJson()`)).toContain("not JSON");
    expect(errorOf(`json.encode([1.0 / 0.0])`)).toContain("unsupported value");
    expect(refusalOf(`json.encode('a string')`).refused).toContain("found no matching overload for 'json.encode'");
    expect(refusalOf(`json.decode(1)`).refused).toContain("found no matching overload for 'json.decode'");
    expect(refusalOf(`1.encodeJson()`).refused).toContain("found no matching overload for 'encodeJson'");
  });

  test("a text nesting past 32 levels is an error before it is parsed; a text of many values ends the run by its budget", async () => {
    const deep = `${"[".repeat(33)}1${"]".repeat(33)}`;
    expect(errorOf(`json.decode(getReqHeader('x')[0])`, { request: { headers: [["x", deep]] } })).toContain("nests deeper than 32 levels");
    expect(valueOf(`json.decode(getReqHeader('x')[0]).size()`, { request: { headers: [["x", `${"[".repeat(32)}1${"]".repeat(32)}`]] } })).toBe(1n);
    // brackets inside strings do not count
    expect(valueOf(`json.decode(getReqHeader('x')[0]).size()`, { request: { headers: [["x", JSON.stringify(["[".repeat(100)])]] } })).toBe(1n);
    const p = policyOf(`on_http_request:\n  - expressions: ["json.decode(getReqHeader('x')[0]).size() > 0"]\n    actions: [{ type: deny, config: { status_code: 418 } }]\n`);
    expect(answered(await p.run("on_http_request", requestInput({ headers: [["x", "[1,2,3]"]] })))?.status).toBe(418);
    const many = `[${Array.from({ length: 20_000 }, () => "0").join(",")}]`;
    const out = await p.run("on_http_request", requestInput({ headers: [["x", many]] }));
    expect(answered(out)?.status).toBe(500);
    expect(out.problems).toEqual([expect.objectContaining({ code: "COST_EXCEEDED" })]);
  });

  test("a loop over a decoded value is estimated as over a list of the request: nested loops over decodes refused at load", () => {
    const [e] = errorsOf(`on_http_request:\n  - expressions: ["json.decode(req.url.query).all(a, json.decode(req.url.query).all(b, json.decode(req.url.query).all(c, a == b)))"]\n    actions: [{ type: deny }]\n`);
    expect(e).toMatchObject({ code: "CEL_TOO_COMPLEX" });
  });
});

describe("queryString", () => {
  test("ngrok's examples: decode to a map of each name's first value, encode a map (names sorted, as Go's url.Values)", () => {
    expect(valueOf(`queryString.decode("a=b&c=d")`)).toEqual({ a: "b", c: "d" });
    expect(valueOf(`queryString.decode(req.url.query)["q"] == "hello"`, { request: { target: "/search?q=hello&q=again" } })).toBe(true);
    expect(valueOf(`queryString.encode({"q":"policy"}) == req.url.query`, { request: { target: "/search?q=policy" } })).toBe(true);
    expect(valueOf(`queryString.encode({'c': 'd', 'a': 'b'})`)).toBe("a=b&c=d");
    expect(valueOf(`{'a':"b",'c':"d"}.encodeQueryString()`)).toBe("a=b&c=d");
    expect(valueOf(`"a=b&c=d".decodeQueryString()`)).toEqual({ a: "b", c: "d" });
  });

  test("escapes as Go's QueryEscape (a space as +), a list value as the name repeated, numbers and bools as their text", () => {
    expect(valueOf(`queryString.encode({'q': "a b&c=d/é*~"})`)).toBe("q=a+b%26c%3Dd%2F%C3%A9%2A~");
    expect(valueOf(`queryString.encode({'a': ['1', '2'], 'n': 3, 't': true})`)).toBe("a=1&a=2&n=3&t=true");
    expect(valueOf(`queryString.decode("q=a+b%26c&flag&=x&&")`)).toEqual({ q: "a b&c", flag: "", "": "x" });
  });

  test("a bad escape or a ; is an error (Go's url.ParseQuery); a value that is no text an error; a wrong type refused at load", () => {
    expect(errorOf(`queryString.decode("a=%zz")`)).toContain("invalid URL escape");
    expect(errorOf(`queryString.decode("a=1;b=2")`)).toContain("invalid semicolon separator");
    expect(errorOf(`queryString.encode({'a': {'b': 'c'}})`)).toContain("must be a string, a number or a bool");
    expect(refusalOf(`queryString.decode(1)`).refused).toContain("found no matching overload");
    expect(refusalOf(`queryString.encode(['a'])`).refused).toContain("found no matching overload");
  });

  test("isQueryString: ngrok's examples, and what is not one", () => {
    expect(valueOf(`'a=b&c=d'.isQueryString()`)).toBe(true);
    expect(valueOf(`'not a query string'.isQueryString()`)).toBe(false);
    expect(valueOf(`'q=a+b%20c&flag'.isQueryString()`)).toBe(true);
    for (const no of ["", "a=%zz", "a=1;b=2", "=x", "a=<b>"]) expect(valueOf(`'${no}'.isQueryString()`)).toBe(false);
  });

  test("a query of many parameters ends the run by its budget", async () => {
    const p = policyOf(`on_http_request:\n  - expressions: ["size(queryString.decode(req.url.query)) > 0"]\n    actions: [{ type: deny, config: { status_code: 418 } }]\n`);
    expect(answered(await p.run("on_http_request", requestInput({ target: "/?a=1" })))?.status).toBe(418);
    const out = await p.run("on_http_request", requestInput({ target: `/?${Array.from({ length: 12_000 }, (_, i) => `k${i}=1`).join("&")}` }));
    expect(answered(out)?.status).toBe(500);
  });
});

describe("url.parse and parseUrl", () => {
  test("ngrok's examples, and the parts of a full URL under Go's field names", () => {
    expect(valueOf(`url.parse("https://ngrok.com").host`)).toBe("ngrok.com");
    expect(valueOf(`"https://ngrok.com".parseUrl().scheme`)).toBe("https");
    expect(valueOf(`url.parse(req.url).host == 'app.tunnels.example.com'`)).toBe(true);
    expect(valueOf(`'HTTPS://user:secret@ngrok.com:8443/a%20b/c?x=1&y=2#frag'.parseUrl()`)).toEqual({
      scheme: "https",
      opaque: "",
      user: "user",
      host: "ngrok.com:8443",
      hostname: "ngrok.com",
      port: "8443",
      path: "/a b/c",
      raw_path: "/a%20b/c",
      raw_query: "x=1&y=2",
      fragment: "frag",
    });
    expect(valueOf(`'/just/a/path?q=1'.parseUrl().path`)).toBe("/just/a/path");
    expect(valueOf(`'mailto:someone@example.com'.parseUrl().opaque`)).toBe("someone@example.com");
    expect(valueOf(`'http://[::1]:80/'.parseUrl().hostname`)).toBe("::1");
  });

  test("a control character, a bad escape, a space in the host, a missing scheme: errors; a wrong type refused at load", () => {
    expect(errorOf(`'http://a\\nb/'.parseUrl()`)).toContain("invalid control character");
    expect(errorOf(`'http://a/%zz'.parseUrl()`)).toContain("invalid URL escape");
    expect(errorOf(`'http://a b.com/'.parseUrl()`)).toContain("invalid character in host name");
    expect(errorOf(`url.parse('://x')`)).toContain("missing protocol scheme");
    expect(refusalOf(`url.parse(1)`).refused).toContain("found no matching overload");
  });
});
