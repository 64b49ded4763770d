/**
 * A request path's normal form (src/http/request-path.ts), the one routes,
 * access rules and the local service all read: a table of paths and what
 * each becomes or why it is refused (the traversals that took a route's
 * service outside its prefix among them), and properties over random
 * paths: the normal form is normal (no dot segment, no empty one, no escape
 * left to decode), making it normal again changes nothing, and a WHATWG URL
 * parser, as a browser or Bun reads a path, leaves it as it is.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { isRefusal, parseRequestHead } from "../../src/http/request-head.ts";
import { normalTarget } from "../../src/http/request-path.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const normal = (path: string): string => {
  const n = normalTarget(path);
  if (typeof n !== "string") throw new Error(`refused ${path}: ${n.why}`);
  return n;
};
const why = (path: string): string => {
  const n = normalTarget(path);
  if (typeof n === "string") throw new Error(`accepted ${path} as ${n}`);
  return n.why;
};

describe("what a path becomes", () => {
  test.each([
    // already normal: the same string
    ["/", "/"],
    ["/api/v1/users", "/api/v1/users"],
    ["/api/", "/api/"],
    ["/a.b/.well-known/x..y/...", "/a.b/.well-known/x..y/..."],
    ["/caf%C3%A9?q=%2e%2E/../x", "/caf%C3%A9?q=%2e%2E/../x"],
    ["/p;param=1/~user/file.name:colon@at!$'()*,", "/p;param=1/~user/file.name:colon@at!$'()*,"],
    ["/a%20b/%3F%23", "/a%20b/%3F%23"],
    // dot segments removed (RFC 3986 §5.2.4), never above the root
    ["/api/../internal-secret.txt", "/internal-secret.txt"],
    ["/a/./b", "/a/b"],
    ["/a/b/.", "/a/b/"],
    ["/a/b/..", "/a/"],
    ["/a/b/../../..", "/"],
    ["/../x", "/x"],
    ["/..", "/"],
    ["/.", "/"],
    ["/a/..?q", "/?q"],
    // slashes merged
    ["//", "/"],
    ["/double//slashes//inside//", "/double/slashes/inside/"],
    ["//x/y", "/x/y"],
    ["/a//../b", "/b"],
    // unreserved escapes decoded, the others' hex digits upper-cased; the query as sent
    ["/%61%70%69/%7e%2D%5f%2E%30", "/api/~-_.0"],
    ["/%7Euser/caf%c3%a9", "/~user/caf%C3%A9"],
    ["/a%2fb?x=%2f", null],
    ["/%41/..?q=/../%2e", "/?q=/../%2e"],
    ["/a?q=#/../x", "/a?q=#/../x"],
  ])("%s", (path, expected) => {
    if (expected === null) return void why(path);
    expect(normal(path)).toBe(expected);
  });

  test("an already normal path is given back as it came", () => {
    const path = "/assets/app.3f2a.js?v=1";
    expect(normalTarget(path)).toBe(path);
  });
});

describe("what is refused, and why", () => {
  test.each([
    ["an encoded dot segment (the issue's second traversal)", "/api/%2e%2e/internal-secret.txt", /dot segment in disguise/],
    ["an encoded slash (the issue's third traversal)", "/api/..%2finternal-secret.txt", /encoded slash/],
    ["an encoded slash, upper case", "/api%2F..%2Fsecret", /encoded slash/],
    ["an encoded backslash", "/api/..%5csecret", /encoded slash or backslash/],
    ["a raw backslash", "/api/..\\secret", /backslash/],
    ["an encoded NUL", "/file%00.txt", /NUL/],
    ["a raw NUL", "/file\0.txt", /NUL/],
    ["one dot encoded", "/api/.%2e/secret", /dot segment in disguise/],
    ["the other dot encoded", "/api/%2E./secret", /dot segment in disguise/],
    ["a single encoded dot", "/api/%2e/x", /dot segment in disguise/],
    ["a dot segment with parameters", "/api/..;x=1/secret", /dot segment in disguise/],
    ["an encoded dot segment with parameters", "/api/%2e%2e;/secret", /dot segment in disguise/],
    ["'..;' at the end", "/api/..;", /dot segment in disguise/],
    ["a '%' that starts no escape", "/100%", /'%'/],
    ["a '%' before one hex digit", "/a%4", /'%'/],
    ["a '%' before no hex digits", "/a%zz/b", /'%'/],
    ["a '%' that an escape decoding would make (%%32%65)", "/%%32%65", /'%'/],
    ["a '#', where a server behind would cut the path", "/api/..#/internal-secret.txt", /'#'/],
    ["a '#' anywhere in the path", "/a#b", /'#'/],
  ])("%s", (_, path, reason) => {
    expect(why(path)).toMatch(reason);
  });

  test("a refusal never repeats the path", () => {
    expect(why("/<script>%2f")).not.toContain("script");
  });
});

describe("the request head carries the normal form", () => {
  const head = (line: string, ...fields: string[]) => parseRequestHead([line, ...fields].join("\r\n"));

  test("the three traversals of a route: normalised out of it, or refused with 400", () => {
    const a = head("GET /api/../internal-secret.txt HTTP/1.1", "Host: a");
    expect(!isRefusal(a) && a.target).toBe("/internal-secret.txt");
    expect(!isRefusal(a) && a.targetAsSent).toBe(false);
    for (const path of ["/api/%2e%2e/internal-secret.txt", "/api/..%2finternal-secret.txt"]) {
      const r = head(`GET ${path} HTTP/1.1`, "Host: a");
      expect(isRefusal(r) && r.status).toBe(400);
    }
  });

  test("a normal path is the target as sent; an absolute form is not", () => {
    const h = head("GET /api/x?y=1 HTTP/1.1", "Host: a");
    expect(!isRefusal(h) && h.targetAsSent && !h.absolute).toBe(true);
    const abs = head("GET http://b.localhost:8080/api/./x HTTP/1.1", "Host: evil.example");
    if (isRefusal(abs)) throw new Error(abs.why);
    expect([abs.target, abs.host, abs.absolute, abs.targetAsSent]).toEqual(["/api/x", "b.localhost:8080", true, false]);
  });

  test("an absolute form without authority, or of another scheme, is a 400", () => {
    for (const target of ["http:///x", "https:///", "ftp://a/x", "http:/x", "file:///etc/passwd"]) {
      const r = head(`GET ${target} HTTP/1.1`, "Host: a");
      expect(isRefusal(r) && r.status).toBe(400);
    }
  });
});

// -- properties over random paths ---------------------------------------------------------------------

/** Pieces paths are made of: the dangerous ones often, anything RFC 3986 allows in a path now and then. */
const piece = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom("/", "//", ".", "..", "/./", "/../", "%2e", "%2E", "%2f", "%5c", "\\", "%00", "%41", "%7e", "%7E", "%c3%a9", "%C3", "%25", "%", "%4", ";", ";x", "a", "b", "api", "?", "#") },
  { weight: 2, arbitrary: fc.stringMatching(/^[A-Za-z0-9\-._~!$&'()*+,;=:@]{0,6}$/) },
  { weight: 1, arbitrary: fc.string({ maxLength: 4 }) },
);
const path = fc.array(piece, { maxLength: 14 }).map((ps) => `/${ps.join("")}`);

const pathOf = (t: string) => t.split("?")[0]!;

describe("properties", () => {
  test("the normal form starts with /, holds no empty, '.' or '..' segment, no escape to decode, no backslash or NUL", () => {
    fc.assert(
      fc.property(path, (p) => {
        const n = normalTarget(p);
        if (typeof n !== "string") return;
        const only = pathOf(n);
        expect(only.startsWith("/")).toBe(true);
        expect(only).not.toMatch(/\/\/|\/\.\.?(\/|$)/);
        expect(only).not.toMatch(/%(?![0-9A-F]{2})|%(?:[46][1-9A-F]|[57][0-9A]|3[0-9]|2[DE]|5F|7E)|%(?:2F|5C|00)/);
        expect(only).not.toMatch(/[\\\0]/);
        // the query is kept as sent
        const q = p.indexOf("?");
        expect(q < 0 ? "" : p.slice(q)).toBe(q < 0 ? "" : n.slice(n.indexOf("?")));
      }),
      fuzzParams(3000, 5_000),
    );
  });

  test("making a normal path normal again changes nothing (idempotence)", () => {
    fc.assert(
      fc.property(path, (p) => {
        const n = normalTarget(p);
        if (typeof n === "string") expect(normalTarget(n)).toBe(n);
      }),
      fuzzParams(3000, 5_000),
    );
  });

  test("a WHATWG URL parser (a browser's, Bun's) finds nothing to resolve in a normal path", () => {
    const pchars = fc.array(fc.constantFrom("/", "//", ".", "..", "%2e", "%41", "%7e", "%c3%a9", "a", "b", ";", "~", "-", "_", ":", "@"), { maxLength: 12 }).map((ps) => `/${ps.join("")}`);
    fc.assert(
      fc.property(pchars, (p) => {
        const n = normalTarget(p);
        if (typeof n === "string") expect(new URL(n, "http://x").pathname).toBe(n);
      }),
      fuzzParams(2000, 5_000),
    );
  });

  test("segment by segment: the path a stack of decoded segments gives", () => {
    const segment = fc.constantFrom("", ".", "..", "a", "b", "%61", "%7E", "x.y", "%C3%A9", "%c3%a9", "...");
    fc.assert(
      fc.property(fc.array(segment, { maxLength: 10 }), (segments) => {
        const stack: string[] = [];
        for (const s of segments) {
          if (s === "" || s === ".") continue;
          if (s === "..") stack.pop();
          else stack.push(s.replace(/%61/g, "a").replace(/%7E/g, "~").replace(/%c3%a9/g, "%C3%A9"));
        }
        const last = segments.at(-1);
        const trailing = last === "" || last === "." || last === "..";
        const expected = stack.length === 0 ? "/" : `/${stack.join("/")}${trailing ? "/" : ""}`;
        expect(normal(`/${segments.join("/")}`)).toBe(expected);
      }),
      fuzzParams(2000, 5_000),
    );
  });
});
