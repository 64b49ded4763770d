/**
 * The functions a policy's expressions have beside CEL's standard ones and
 * its strings extension: ngrok's macros under ngrok's names (the ones a
 * self-hosted edge can give: addresses, headers, query, cookies, base64,
 * URL escaping, hashes, and those of checksums.ts, list-functions.ts and
 * json-functions.ts), and the standard functions that make strings
 * wrapped so that what they make is paid for: a concatenation, a replace
 * or a join costs a unit per KiB made and may not make more than
 * the run's maxValueBytes (limits.ts), so no expression can fill the edge's memory.
 */
import { createHash } from "node:crypto";
import { celEnv, celFunc, celMethod, CelScalar, isCelError, isCelList, listType, mapType, type CelFunc, type CelList, type CelValue } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { CidrList, isCidrOrAddress } from "../../http/addresses.ts";
import { cookieValue, responseCookies } from "../set-cookie.ts";
import { CHECKSUM_FUNCTIONS } from "./checksums.ts";
import { pay } from "./cost.ts";
import { scope } from "./evaluation.ts";
import { JSON_FUNCTIONS } from "./json-functions.ts";
import { LIST_FUNCTIONS } from "./list-functions.ts";

const { STRING, BOOL, BYTES, DYN, DOUBLE, INT } = CelScalar;
const STRINGS = listType(STRING);

/**
 * CIDR lists by their text: a range is almost always a literal, parsed once
 * and kept. Bounded: past the cap the cache starts again.
 */
const CIDR_CACHE_MAX = 1024;
const cidrCache = new Map<string, Ranges>();

/** Addresses each list remembers its answer for: a visitor's address is asked again on each of its requests. */
const ANSWERS_KEPT = 256;

/** A CIDR list and its last answers: an address parsed (ipaddr.js) once, not once a request. */
export class Ranges {
  private readonly list: CidrList;
  private readonly answers = new Map<string, boolean>();
  constructor(list: readonly string[]) {
    // ngrok's rule: an invalid range matches nothing and is otherwise ignored
    this.list = new CidrList(list.filter((c) => isCidrOrAddress(c.trim())).map((c) => c.trim()));
  }
  matches(address: string): boolean {
    let answer = this.answers.get(address);
    if (answer === undefined) {
      answer = this.list.matches(address);
      if (this.answers.size >= ANSWERS_KEPT) this.answers.clear();
      this.answers.set(address, answer);
    }
    return answer;
  }
}

export function cidrs(list: readonly string[]): Ranges {
  const key = list.join("\n");
  let found = cidrCache.get(key);
  if (!found) {
    if (cidrCache.size >= CIDR_CACHE_MAX) cidrCache.clear();
    found = new Ranges(list);
    cidrCache.set(key, found);
  }
  return found;
}

/** rand.int: min to max, both included. */
function randomInt(min: bigint, max: bigint): bigint {
  if (min > max) throw new Error("rand.int: the minimum is above the maximum");
  const span = max - min;
  const drawn = BigInt(Math.floor(Math.random() * (Number(span) + 1)));
  // a span past 2^53 is drawn as a float, which may round past it
  return min + (drawn > span ? span : drawn);
}

/** RFC 1918's ranges, as ngrok's isPrivateIp() means them. */
const PRIVATE_V4 = new Ranges(["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"]);

const stringsOf = (list: CelList): string[] => {
  const out: string[] = [];
  for (const v of list) if (typeof v === "string") out.push(v);
  return out;
};

function digest(algorithm: string, text: string, format: string): string {
  pay(text.length);
  if (format !== "hex" && format !== "base64") throw new Error(`hash format '${format}' is neither 'hex' nor 'base64'`);
  return createHash(algorithm).update(text, "utf8").digest(format);
}

const hashes: CelFunc[] = [
  ["md5", "md5"],
  ["sha1", "sha1"],
  ["sha256", "sha256"],
  ["sha512", "sha512"],
].flatMap(([name, algorithm]) => [
  celFunc(`hash.${name}`, [STRING], STRING, (s) => digest(algorithm!, s, "hex")),
  celFunc(`hash.${name}`, [STRING, STRING], STRING, (s, f) => digest(algorithm!, s, f)),
  celMethod(name!, STRING, [], STRING, function () {
    return digest(algorithm!, this, "hex");
  }),
  celMethod(name!, STRING, [STRING], STRING, function (f) {
    return digest(algorithm!, this, f);
  }),
]);

/**
 * The most characters a call can make, told before it runs: a replace of
 * an empty pattern puts the replacement between every character, so the
 * size is paid for (and refused past the cap) before it is made.
 */
function bound(name: string, target: CelValue, args: CelValue[]): number {
  if (name === "replace" && typeof target === "string" && typeof args[0] === "string" && typeof args[1] === "string") {
    const matches = args[0] === "" ? target.length + 1 : Math.floor(target.length / args[0].length);
    const limit = typeof args[2] === "bigint" && args[2] >= 0n ? Number(args[2]) : matches;
    return target.length + Math.min(matches, limit) * args[1].length;
  }
  if (name === "join" && isCelList(target)) {
    let n = typeof args[0] === "string" ? args[0].length * target.size : 0;
    for (const v of target) n += typeof v === "string" ? v.length : 0;
    return n;
  }
  return 0;
}

/** A strings-extension method whose result is paid for by its size. */
function sized(original: CelFunc): CelFunc {
  const impl = function (this: CelValue, ...args: CelValue[]) {
    pay(bound(original.name, this, args));
    const out = original.call(0, this, args);
    if (out === undefined || isCelError(out)) throw out ?? new Error(`no overload of ${original.name}`);
    if (typeof out === "string" && original.name === "format") pay(out.length);
    return out;
  };
  return original.target
    ? celMethod(original.name, original.target, original.arguments, original.result, impl as never)
    : celFunc(original.name, original.arguments, original.result, impl as never);
}

/** The response's cookie of that name (the longest path among several), read off its Set-Cookie fields. */
function responseCookie(name: string) {
  const fields = scope()?.header("res", "set-cookie");
  if (!fields) return undefined;
  for (const f of fields) pay(f.length);
  return responseCookies(fields).get(name)?.[0];
}

/** The standard `matches` method (CEL's RE2: no pattern can backtrack), which the global form calls. */
const celMatches: CelFunc = [...(celEnv().funcs.find("matches") ?? [])].find((f) => f.target !== undefined)!;

const MAKES_STRINGS = new Set(["replace", "join", "format"]);

export const POLICY_FUNCTIONS: CelFunc[] = [
  ...strings.map((f) => (MAKES_STRINGS.has(f.name) ? sized(f) : f)),
  celFunc("_+_", [STRING, STRING], STRING, (a, b) => {
    pay(a.length + b.length);
    return a + b;
  }),
  celFunc("_+_", [BYTES, BYTES], BYTES, (a, b) => {
    pay(a.length + b.length);
    const out = new Uint8Array(a.length + b.length);
    out.set(a);
    out.set(b, a.length);
    return out;
  }),
  celFunc("matches", [STRING, STRING], BOOL, (s, re) => {
    const out = celMatches.call(0, s, [re]);
    if (isCelError(out)) throw out;
    return out === true;
  }),
  celFunc("inCidrRange", [STRING, STRING], BOOL, (ip, range) => cidrs([range]).matches(ip)),
  celFunc("inCidrRanges", [STRING, listType(DYN)], BOOL, (ip, ranges) => cidrs(stringsOf(ranges)).matches(ip)),
  celFunc("getReqHeader", [STRING], STRINGS, (name) => [...(scope()?.header("req", name) ?? [])]),
  celFunc("hasReqHeader", [STRING], BOOL, (name) => scope()?.header("req", name) !== undefined),
  celFunc("getResHeader", [STRING], STRINGS, (name) => [...(scope()?.header("res", name) ?? [])]),
  celFunc("hasResHeader", [STRING], BOOL, (name) => scope()?.header("res", name) !== undefined),
  celFunc("getQueryParam", [STRING], STRINGS, (name) => [...(scope()?.queryParam(name) ?? [])]),
  celFunc("hasQueryParam", [STRING], BOOL, (name) => scope()?.queryParam(name) !== undefined),
  celFunc("hasReqCookie", [STRING], BOOL, (name) => scope()?.cookie(name) !== undefined),
  celFunc("getReqCookie", [STRING], mapType(STRING, STRING), (name) => {
    const c = scope()?.cookie(name);
    if (!c) throw new Error(`no cookie named '${name}'`);
    return new Map([
      ["name", c.name],
      ["value", c.value],
    ]);
  }),
  celFunc("hasResCookie", [STRING], BOOL, (name) => responseCookie(name) !== undefined),
  celFunc("getResCookie", [STRING], mapType(STRING, DYN), (name) => {
    const c = responseCookie(name);
    if (!c) throw new Error(`no cookie named '${name}' on the response`);
    return cookieValue(c) as never;
  }),
  celFunc("base64.encode", [BYTES], STRING, (b) => {
    pay(b.length);
    return Buffer.from(b).toString("base64");
  }),
  celFunc("base64.decode", [STRING], BYTES, (s) => {
    pay(s.length);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 !== 0) throw new Error("not base64");
    return new Uint8Array(Buffer.from(s, "base64"));
  }),
  celFunc("basic_auth.encode", [STRING, STRING], STRING, (user, password) => `Basic ${Buffer.from(`${user}:${password}`, "utf8").toString("base64")}`),
  celFunc("url.escape", [STRING], STRING, (s) => {
    pay(s.length * 3);
    return encodeURIComponent(s);
  }),
  celFunc("url.unescape", [STRING], STRING, (s) => decodeURIComponent(s)),
  // ngrok's random macros (A/B splits, sampling): a fresh value on each evaluation, never a secret
  celFunc("rand.double", [], DOUBLE, () => Math.random()),
  celFunc("rand.int", [INT, INT], INT, randomInt),
  celFunc("rand.int", [], INT, () => randomInt(0n, 1n)),
  // ngrok's string methods beside the global forms above
  celMethod("encodeBase64", STRING, [], STRING, function () {
    pay(this.length * 2);
    return Buffer.from(this, "utf8").toString("base64");
  }),
  celMethod("decodeBase64", STRING, [], STRING, function () {
    pay(this.length);
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(this) || this.length % 4 !== 0) throw new Error("not base64");
    return Buffer.from(this, "base64").toString("utf8");
  }),
  celMethod("escapeUrl", STRING, [], STRING, function () {
    pay(this.length * 3);
    return encodeURIComponent(this);
  }),
  celMethod("unescapeUrl", STRING, [], STRING, function () {
    return decodeURIComponent(this);
  }),
  celMethod("isPrivateIp", STRING, [], BOOL, function () {
    return isCidrOrAddress(this) && !this.includes("/") && PRIVATE_V4.matches(this);
  }),
  celMethod("isJson", STRING, [], BOOL, function () {
    pay(this.length);
    try {
      JSON.parse(this);
      return true;
    } catch {
      return false;
    }
  }),
  celMethod("isURL", STRING, [], BOOL, function () {
    return URL.canParse(this);
  }),
  celMethod("lower", STRING, [], STRING, function () {
    return this.toLowerCase();
  }),
  celMethod("upper", STRING, [], STRING, function () {
    return this.toUpperCase();
  }),
  // the strings extension's reverse, which ngrok documents: by code points
  celMethod("reverse", STRING, [], STRING, function () {
    pay(this.length);
    return [...this].reverse().join("");
  }),
  ...hashes,
  ...CHECKSUM_FUNCTIONS,
  ...LIST_FUNCTIONS,
  ...JSON_FUNCTIONS,
];
