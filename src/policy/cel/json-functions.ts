/**
 * ngrok's JSON, query-string and URL macros: `json.encode`/`json.decode`
 * and the `encodeJson`/`decodeJson` methods, `queryString.encode`/
 * `queryString.decode` and the `encodeQueryString`/`decodeQueryString`/
 * `isQueryString` methods, `url.parse` and `parseUrl`.
 *
 * What they make is paid for (cost.ts): the text they read or write by
 * its size, a unit per KiB, and each value a decode makes a unit, as a
 * macro's loop step; a JSON text nesting deeper than the run's maxJsonDepth is an
 * error before it is parsed, and a decode makes no more than
 * maxMadeEntries values. Where ngrok's docs are silent they do what Go,
 * which ngrok's edge is written in, does: JSON numbers are doubles, map
 * keys are written sorted, a query string's keys too.
 */
import { celFunc, celMethod, CelScalar, isCelList, isCelMap, isCelUint, listType, mapType, type CelFunc, type CelValue } from "@bufbuild/cel";
import { pay, payEntries } from "./cost.ts";
import { caps } from "./evaluation.ts";

const { DYN, STRING, BOOL } = CelScalar;
const LIST = listType(DYN);
const MAP = mapType(DYN, DYN);
const STRING_MAP = mapType(STRING, STRING);

/** The offset where `text`'s brackets (outside its strings) first nest past `limit`, or -1. */
function nestsPast(text: string, limit: number): number {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      for (i++; i < text.length && text.charCodeAt(i) !== 0x22; i++) if (text.charCodeAt(i) === 0x5c) i++;
    } else if (c === 0x5b || c === 0x7b) {
      if (++depth > limit) return i;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return -1;
}

/** A parsed JSON value as CEL's: numbers as doubles, objects as maps; a unit paid per value. */
function celOf(v: unknown, made: { count: number; max: number }): CelValue {
  if (++made.count > made.max) throw new Error(`the JSON text has more than ${made.max} values`);
  payEntries(1);
  if (v === null || typeof v === "string" || typeof v === "number" || typeof v === "boolean") return v as CelValue;
  if (Array.isArray(v)) return v.map((x) => celOf(x, made)) as never;
  const out = new Map<string, CelValue>();
  for (const [k, x] of Object.entries(v as object)) out.set(k, celOf(x, made));
  return out as never;
}

function decodeJson(text: string): CelValue {
  pay(text.length);
  const { maxJsonDepth, maxMadeEntries } = caps();
  if (nestsPast(text, maxJsonDepth) >= 0) throw new Error(`the JSON text nests deeper than ${maxJsonDepth} levels`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error("not JSON");
  }
  return celOf(parsed, { count: 0, max: maxMadeEntries });
}

/** A CEL value as JSON text, as Go's encoding/json writes it (map keys sorted); a unit paid per value, the text by its size. */
function encodeJson(v: CelValue): string {
  const out: string[] = [];
  let length = 0;
  const { maxValueBytes, maxJsonDepth } = caps();
  const put = (s: string) => {
    length += s.length;
    if (length > maxValueBytes) pay(length); // refused before more is made
    out.push(s);
  };
  const write = (x: CelValue, depth: number): void => {
    payEntries(1);
    if (depth > maxJsonDepth) throw new Error(`the value nests deeper than ${maxJsonDepth} levels`);
    if (x === null) return put("null");
    switch (typeof x) {
      case "string":
      case "boolean":
        return put(JSON.stringify(x));
      case "bigint":
        return put(x.toString());
      case "number":
        if (!Number.isFinite(x)) throw new Error(`json: unsupported value: ${x}`);
        return put(JSON.stringify(x));
    }
    if (isCelUint(x)) return put(x.value.toString());
    if (x instanceof Uint8Array) return put(JSON.stringify(Buffer.from(x).toString("base64")));
    if (isCelList(x)) {
      put("[");
      let first = true;
      for (const e of x) {
        if (!first) put(",");
        first = false;
        write(e, depth + 1);
      }
      return put("]");
    }
    if (isCelMap(x)) {
      const entries = [...x.entries()].map(([k, e]) => [typeof k === "object" ? k.value.toString() : String(k), e] as const);
      entries.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
      put("{");
      entries.forEach(([k, e], i) => {
        if (i > 0) put(",");
        put(JSON.stringify(k));
        put(":");
        write(e, depth + 1);
      });
      return put("}");
    }
    const m = (x as unknown as { desc?: { typeName?: string }; message?: { seconds: bigint; nanos: number } });
    if (m.desc?.typeName === "google.protobuf.Timestamp" && m.message) {
      return put(JSON.stringify(new Date(Number(m.message.seconds) * 1000 + Math.floor(m.message.nanos / 1e6)).toISOString()));
    }
    if (m.desc?.typeName === "google.protobuf.Duration" && m.message) {
      return put(JSON.stringify(`${Number(m.message.seconds) + m.message.nanos / 1e9}s`));
    }
    throw new Error("json: a value of this type cannot be encoded");
  };
  write(v, 0);
  const text = out.join("");
  pay(text.length);
  return text;
}

/** Go's url.QueryEscape: all but letters, digits and `-_.~` escaped, a space as `+`. */
function queryEscape(s: string): string {
  return encodeURIComponent(s)
    .replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(/%20/g, "+");
}

function queryUnescape(s: string): string {
  try {
    return decodeURIComponent(s.replace(/\+/g, " "));
  } catch {
    throw new Error(`invalid URL escape in '${s.slice(0, 64)}'`);
  }
}

/**
 * A query string's parameters, as Go's url.ParseQuery reads it (`&`
 * separates, `+` is a space, a `;` or a bad `%` escape is an error), each
 * name to its first value, as `queryString.decode(q)['q'] == 'hello'`
 * reads it.
 */
function decodeQuery(query: string): Map<string, string> {
  pay(query.length);
  const max = caps().maxMadeEntries;
  const out = new Map<string, string>();
  for (const part of query.split("&")) {
    if (part === "") continue;
    if (part.includes(";")) throw new Error("invalid semicolon separator in query");
    payEntries(1);
    if (out.size >= max) throw new Error(`the query string has more than ${max} parameters`);
    const eq = part.indexOf("=");
    const name = queryUnescape(eq < 0 ? part : part.slice(0, eq));
    const value = eq < 0 ? "" : queryUnescape(part.slice(eq + 1));
    if (!out.has(name)) out.set(name, value);
  }
  return out;
}

/** A value as a query parameter's text: a string, a number or a bool. */
function paramText(v: CelValue): string {
  if (typeof v === "string") return v;
  if (typeof v === "bigint" || typeof v === "number" || typeof v === "boolean") return String(v);
  if (isCelUint(v)) return v.value.toString();
  throw new Error("a query parameter's value must be a string, a number or a bool (or a list of them)");
}

/** A map as a query string, as Go's url.Values.Encode writes it: names sorted, a list value as the name repeated. */
function encodeQuery(map: ReadonlyMap<unknown, CelValue>): string {
  const names = [...map.keys()].map((k) => (isCelUint(k) ? k.value.toString() : String(k)));
  const values = new Map<string, CelValue>();
  for (const [k, v] of map) values.set(isCelUint(k) ? k.value.toString() : String(k), v);
  names.sort();
  const parts: string[] = [];
  let length = 0;
  for (const name of names) {
    const v = values.get(name)!;
    for (const one of isCelList(v) ? [...v] : [v]) {
      payEntries(1);
      const part = `${queryEscape(name)}=${queryEscape(paramText(one))}`;
      length += part.length + 1;
      pay(length);
      parts.push(part);
    }
  }
  return parts.join("&");
}

/** Characters of a query beside `%XX` escapes (RFC 3986's query characters, `&` and `=` being its separators). */
const QUERY_PART = /^(?:[A-Za-z0-9\-._~!$'()*+,:@/?]|%[0-9A-Fa-f]{2})*$/;

/** Whether `s` is a query string: `&`-separated `name=value` pairs (a bare name too), of a URL query's characters, no `;`, no bad escape. */
function isQueryString(s: string): boolean {
  pay(s.length);
  if (s === "") return false;
  for (const part of s.split("&")) {
    if (part === "") continue;
    const eq = part.indexOf("=");
    const name = eq < 0 ? part : part.slice(0, eq);
    const value = eq < 0 ? "" : part.slice(eq + 1);
    if (name === "" || !QUERY_PART.test(name) || !QUERY_PART.test(value)) return false;
  }
  return true;
}

/** RFC 3986's appendix B: a URI reference's parts. */
const URI_PARTS = /^(?:([^:/?#]+):)?(?:\/\/([^/?#]*))?([^?#]*)(?:\?([^#]*))?(?:#(.*))?$/s;

/**
 * A URL's parts as Go's net/url.URL has them, under its field names in
 * snake case (what ngrok's `url.parse` returns): `scheme` (lower case),
 * `opaque`, `user`, `host` (with its port), `hostname`, `port`, `path`
 * (unescaped), `raw_path`, `raw_query`, `fragment`. As Go's url.Parse,
 * a relative reference is a URL; a control character, a space in the
 * host, a bad `%` escape or a scheme that is not one is an error.
 */
function parseUrl(text: string): Map<string, string> {
  pay(text.length);
  if (/[\x00-\x1f\x7f]/.test(text)) throw new Error("net/url: invalid control character in URL");
  const m = URI_PARTS.exec(text);
  if (!m) throw new Error("not a URL");
  const [, scheme = "", authority, rest = "", query = "", fragment = ""] = m;
  if (text.startsWith(":")) throw new Error("missing protocol scheme");
  if (scheme !== "" && !/^[A-Za-z][A-Za-z0-9+.-]*$/.test(scheme)) throw new Error("first path segment in URL cannot contain colon");
  let opaque = "";
  let path = rest;
  if (scheme !== "" && authority === undefined && !rest.startsWith("/")) {
    opaque = rest;
    path = "";
  }
  let user = "";
  let host = authority ?? "";
  const at = host.lastIndexOf("@");
  if (at >= 0) {
    user = unescapeStrict(host.slice(0, at)).split(":")[0]!;
    host = host.slice(at + 1);
  }
  if (/[\s<>"{}|\\^`]/.test(host)) throw new Error(`invalid character in host name`);
  const hostPort = /^(\[[^\]]*\]|[^:]*)(?::(\d*))?$/.exec(host);
  if (!hostPort) throw new Error(`invalid port in host '${host}'`);
  const decodedPath = unescapeStrict(path);
  return new Map([
    ["scheme", scheme.toLowerCase()],
    ["opaque", opaque],
    ["user", user],
    ["host", host],
    ["hostname", hostPort[1]!.replace(/^\[|\]$/g, "")],
    ["port", hostPort[2] ?? ""],
    ["path", decodedPath],
    ["raw_path", path.includes("%") ? path : ""],
    ["raw_query", query],
    ["fragment", unescapeStrict(fragment)],
  ]);
}

function unescapeStrict(s: string): string {
  if (!s.includes("%")) return s;
  try {
    return decodeURIComponent(s);
  } catch {
    throw new Error(`invalid URL escape in '${s.slice(0, 64)}'`);
  }
}

export const JSON_FUNCTIONS: CelFunc[] = [
  celFunc("json.decode", [STRING], DYN, decodeJson),
  celFunc("json.encode", [LIST], STRING, encodeJson),
  celFunc("json.encode", [MAP], STRING, encodeJson),
  celMethod("decodeJson", STRING, [], DYN, function () {
    return decodeJson(this);
  }),
  celMethod("encodeJson", LIST, [], STRING, function () {
    return encodeJson(this);
  }),
  celMethod("encodeJson", MAP, [], STRING, function () {
    return encodeJson(this);
  }),
  celFunc("queryString.decode", [STRING], STRING_MAP, decodeQuery),
  celFunc("queryString.encode", [MAP], STRING, encodeQuery),
  celMethod("decodeQueryString", STRING, [], STRING_MAP, function () {
    return decodeQuery(this);
  }),
  celMethod("encodeQueryString", MAP, [], STRING, function () {
    return encodeQuery(this);
  }),
  celMethod("isQueryString", STRING, [], BOOL, function () {
    return isQueryString(this);
  }),
  celFunc("url.parse", [STRING], STRING_MAP, parseUrl),
  celMethod("parseUrl", STRING, [], STRING_MAP, function () {
    return parseUrl(this);
  }),
];
