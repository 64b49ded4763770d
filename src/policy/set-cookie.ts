/**
 * A response's cookies, read from its Set-Cookie fields as ngrok's cookie
 * struct has them (`res.cookies`, `getResCookie`): `name`, `value`,
 * `path`, `domain`, `expires` (a timestamp; Go's zero time,
 * 0001-01-01T00:00:00Z, when absent or unreadable), `max_age` (a duration:
 * 0s when absent, -1s for `Max-Age=0` or less, as Go's http.Cookie has
 * it), `secure`, `http_only`, `same_site` (`Lax`, `Strict`, `None`, or
 * empty) and `unparsed_attributes` (the others, name to value). Several of
 * one name are ordered by their path's length, the longest first.
 */
import { create } from "@bufbuild/protobuf";
import { reflect, type ReflectMessage } from "@bufbuild/protobuf/reflect";
import { DurationSchema, TimestampSchema, timestampFromMs } from "@bufbuild/protobuf/wkt";

export interface ResponseCookie {
  name: string;
  value: string;
  path: string;
  domain: string;
  /** Reflected messages, as CEL reads them even outside an evaluation (an interpolation writes them). */
  expires: ReflectMessage;
  max_age: ReflectMessage;
  secure: boolean;
  http_only: boolean;
  same_site: string;
  unparsed_attributes: Map<string, string>;
}

/** Go's time.Time{}, 0001-01-01T00:00:00Z: what a cookie without a readable Expires has. */
const zeroTime = () => reflect(TimestampSchema, create(TimestampSchema, { seconds: -62135596800n }));
const duration = (seconds: number) => reflect(DurationSchema, create(DurationSchema, { seconds: BigInt(seconds) }));

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const SAME_SITE: Record<string, string> = { lax: "Lax", strict: "Strict", none: "None" };

/** One Set-Cookie field's cookie, or undefined when its name is not a token (Go's readSetCookies skips it). */
export function parseSetCookie(field: string): ResponseCookie | undefined {
  const parts = field.split(";");
  const first = parts[0]!;
  const eq = first.indexOf("=");
  if (eq < 0) return undefined;
  const name = first.slice(0, eq).trim();
  if (!TOKEN.test(name)) return undefined;
  let value = first.slice(eq + 1).trim();
  if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1);
  const cookie: ResponseCookie = {
    name,
    value,
    path: "",
    domain: "",
    expires: zeroTime(),
    max_age: duration(0),
    secure: false,
    http_only: false,
    same_site: "",
    unparsed_attributes: new Map(),
  };
  for (let i = 1; i < parts.length; i++) {
    const part = parts[i]!.trim();
    if (part === "") continue;
    const at = part.indexOf("=");
    const key = (at < 0 ? part : part.slice(0, at)).trim();
    const val = at < 0 ? "" : part.slice(at + 1).trim();
    switch (key.toLowerCase()) {
      case "path":
        cookie.path = val;
        continue;
      case "domain":
        cookie.domain = val;
        continue;
      case "secure":
        cookie.secure = true;
        continue;
      case "httponly":
        cookie.http_only = true;
        continue;
      case "samesite":
        cookie.same_site = SAME_SITE[val.toLowerCase()] ?? "";
        continue;
      case "max-age": {
        if (!/^-?\d{1,15}$/.test(val) || (val.length > 1 && val.startsWith("0"))) continue;
        const seconds = Number(val);
        cookie.max_age = duration(seconds <= 0 ? -1 : seconds);
        continue;
      }
      case "expires": {
        const ms = Date.parse(val);
        if (!Number.isNaN(ms)) cookie.expires = reflect(TimestampSchema, timestampFromMs(ms));
        continue;
      }
    }
    cookie.unparsed_attributes.set(key, val);
  }
  return cookie;
}

/** The cookie as CEL reads it: a map of its fields. */
export function cookieValue(c: ResponseCookie): Map<string, unknown> {
  return new Map<string, unknown>(Object.entries(c));
}

/** The response's cookies by name, each name's longest path first. */
export function responseCookies(fields: readonly string[] | undefined): Map<string, ResponseCookie[]> {
  const out = new Map<string, ResponseCookie[]>();
  for (const field of fields ?? []) {
    const c = parseSetCookie(field);
    if (!c) continue;
    const list = out.get(c.name);
    if (list) list.push(c);
    else out.set(c.name, [c]);
  }
  for (const list of out.values()) if (list.length > 1) list.sort((a, b) => b.path.length - a.path.length);
  return out;
}

/** `res.cookies`: name to the list of its cookies' maps. */
export function responseCookiesValue(fields: readonly string[] | undefined): Map<string, Map<string, unknown>[]> {
  return new Map([...responseCookies(fields)].map(([k, list]) => [k, list.map(cookieValue)]));
}
