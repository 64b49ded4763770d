/**
 * A visitor's request head, from its text to what the edge decides on: the
 * method, target and version as sent, the header fields in their order with
 * their names' case, how the body is framed, and whether the connection may
 * carry another request.
 *
 * Strict wherever a lax reading could frame the body two ways, which is how
 * requests are smuggled past one server to the next (RFC 9112 §6.3, §11.2):
 * Transfer-Encoding with Content-Length, lengths that disagree, a coding list
 * that does not end in chunked, whitespace before a colon, folded lines,
 * control characters. A head that does not parse is a refusal with the
 * status to answer, never a guess.
 */

import { listHas, pushList, readFields } from "./field-lines.ts";
import { normalTarget } from "./request-path.ts";


export type RequestFraming = "none" | "length" | "chunked";

export interface RequestHead {
  method: string;
  /**
   * The request target in origin form ("/a?b"), its path made normal
   * (request-path.ts), or "*"; an absolute-form target is given here as its
   * path and query.
   */
  target: string;
  /** The request line's target is `target` as it came: false when it was absolute or its path not normal (forwarders write the line anew). */
  targetAsSent: boolean;
  /** The target came in absolute form: `host` is its authority, which replaces any Host field (RFC 9112 §3.2.2). */
  absolute: boolean;
  /** 0 for HTTP/1.0, 1 for HTTP/1.1. */
  minor: 0 | 1;
  /** Every header field in order, names as sent, values without the whitespace around them. */
  fields: [string, string][];
  /** The fields' names in lower case, in the same order (read once here, not by every reader). */
  names: string[];
  /** `fields` holds every field of the head; false when it was parsed for some (or none) of them: everyField reads the rest, once. */
  whole: boolean;
  /** The Host (or an absolute-form target's authority); undefined when the request named none. */
  host: string | undefined;
  framing: RequestFraming;
  /** The body's length for "length" framing. */
  length: number;
  /** The connection may carry another request after this one. */
  keepAlive: boolean;
  /** `Expect: 100-continue`: the client waits for a 100 (or the final answer) before its body. */
  expectContinue: boolean;
  /** What the client asks to switch to (the Upgrade field, lower-cased) when Connection lists `upgrade`. */
  upgrade: string | undefined;
}

export interface HeadRefusal {
  status: 400 | 417 | 431 | 501 | 505;
  /** Why, in words for the sender (never echoes what was sent). */
  why: string;
}

export const MAX_REQUEST_FIELDS = 256;
export const MAX_NAME_LENGTH = 256;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** method SP request-target SP HTTP-version; the target is visible ASCII. */
const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) ([\x21-\x7e]+) HTTP\/(\d)\.(\d)$/;
const DIGITS = /^[0-9]{1,15}$/;
const ABSOLUTE = /^https?:\/\/([^/?#]*)([^#]*)$/i;

const refuse = (status: HeadRefusal["status"], why: string): HeadRefusal => ({ status, why });

/** The lengths of the names the parser itself reads: host, expect, upgrade, connection, content-length, transfer-encoding. */
export const OWN_NAMES: ReadonlySet<number> = new Set([4, 6, 7, 10, 14, 17]);
const unions = new WeakMap<ReadonlySet<number>, ReadonlySet<number>>();
/** A caller's lengths and the parser's own, made once per caller's set. */
export function withOwnNames(lengths: ReadonlySet<number>): ReadonlySet<number> {
  let union = unions.get(lengths);
  if (!union) unions.set(lengths, (union = new Set([...OWN_NAMES, ...lengths])));
  return union;
}

/**
 * What the fields of the head being parsed said: one object, reset for each
 * head (parsing never overlaps), and its method the readFields visitor, so
 * a parse makes no closure.
 */
export class RequestFields {
  kept: [string, string][] = [];
  names: string[] = [];
  hosts = 0;
  host: string | undefined;
  lengths: string[] | undefined;
  codings: string[] | undefined;
  connection = "";
  upgradeField: string | undefined;
  expect: string | undefined;
  /** The fields are handed to the caller (false: only what they say is read; `fields` false). */
  private keeps = true;

  start(keeps: boolean): this {
    this.keeps = keeps;
    this.kept = keeps ? [] : NO_FIELDS;
    this.names = keeps ? [] : NO_NAMES;
    this.hosts = 0;
    this.host = undefined;
    this.lengths = undefined;
    this.codings = undefined;
    this.connection = "";
    this.upgradeField = undefined;
    this.expect = undefined;
    return this;
  }

  field(name: string, lower: string, value: string): void {
    if (this.keeps) {
      this.kept.push([name, value]);
      this.names.push(lower);
    }
    switch (lower) {
      case "host":
        this.hosts++;
        this.host = value;
        break;
      case "content-length":
        pushList((this.lengths ??= []), value);
        break;
      case "transfer-encoding":
        pushList((this.codings ??= []), value.toLowerCase());
        break;
      case "connection":
        this.connection += `,${value.toLowerCase()}`;
        break;
      case "upgrade":
        this.upgradeField = value.toLowerCase();
        break;
      case "expect":
        this.expect = this.expect === undefined ? value.toLowerCase() : `${this.expect},${value.toLowerCase()}`;
        break;
    }
  }
}
/** The one visitor of every parse (parsing never overlaps: request-head-bytes.ts uses it too). */
export const requestFields = new RequestFields();
/** The fields of a head read with `fields` false: none (shared, never written). */
const NO_FIELDS: [string, string][] = [];
const NO_NAMES: string[] = [];

/**
 * Parses a request head: the request line and header lines, separated by
 * CRLF, without the blank line that ends it. `fields` false: every line is
 * checked and what the parser needs read, but `fields` and `names` stay
 * empty (for a reader that passes the head on as it came without showing
 * it); a set of name lengths: the fields of those names, the parser's own
 * and those the edge takes out (X-Burrow-* in any spelling, X-Real-IP,
 * Forwarded) are kept (the caller reads them).
 */
export function parseRequestHead(text: string, fields: boolean | ReadonlySet<number> = true, maxFields = MAX_REQUEST_FIELDS): RequestHead | HeadRefusal {
  const firstEnd = text.indexOf("\r\n");
  const first = firstEnd < 0 ? text : text.slice(0, firstEnd);
  const line = REQUEST_LINE.exec(first);
  if (!line) {
    if (/^\S+ \S+ \S+$/.test(first) && !/ HTTP\/\d\.\d$/.test(first)) return refuse(505, "Only HTTP/1.0 and HTTP/1.1 are spoken here.");
    return refuse(400, "The request line is malformed.");
  }
  if (line[3] !== "1" || (line[4] !== "0" && line[4] !== "1")) return refuse(505, "Only HTTP/1.0 and HTTP/1.1 are spoken here.");
  const minor = line[4] === "0" ? 0 : 1;
  const method = line[1]!;
  const sent = line[2]!;
  let target = sent;
  let authority: string | undefined;
  if (target.charCodeAt(0) !== 0x2f /* / */) {
    const absolute = ABSOLUTE.exec(target);
    if (absolute) {
      // absolute form (RFC 9112 §3.2.2): its authority names the host, whatever Host says
      authority = absolute[1]!;
      if (authority === "") return refuse(400, "The request target names no host.");
      target = absolute[2] === "" ? "/" : absolute[2]![0] === "?" ? `/${absolute[2]}` : absolute[2]!;
      if (target[0] !== "/") return refuse(400, "The request target is malformed.");
    } else if (target !== "*" || method !== "OPTIONS") {
      return refuse(400, method === "CONNECT" ? "CONNECT is not served here." : "The request target is malformed.");
    }
  }
  if (target !== "*") {
    // one path for every reader after this one: routes, access rules, the edge's own paths, the service
    const normal = normalTarget(target);
    if (typeof normal !== "string") return refuse(400, normal.why);
    target = normal;
  }

  const seen = requestFields.start(fields !== false);
  const some = fields !== true && fields !== false;
  // a caller that reads some fields is handed those the edge takes out too (burrow-fields.ts), whatever their length
  const fault = readFields(text, firstEnd < 0 ? text.length : firstEnd + 2, maxFields, MAX_NAME_LENGTH, seen, fields === true ? undefined : some ? withOwnNames(fields) : OWN_NAMES, some);
  if (fault === "too-many") return refuse(431, `More than ${maxFields} header fields.`);
  if (fault === "line") return refuse(400, "A header line is malformed.");
  if (fault === "name" || fault === "long-name") return refuse(400, "A header name is malformed.");
  if (fault === "value") return refuse(400, "A header value holds control characters.");
  // every field kept (none of another length): the head is whole, as request-head-bytes.ts says it too
  return headFrom(seen, method, target, sent, authority, minor, fields === true || (some && seen.kept.length === fieldLines(text, firstEnd)));
}

/** How many field lines a well-formed head's text has after its request line (ending at `firstEnd`). */
function fieldLines(text: string, firstEnd: number): number {
  if (firstEnd < 0 || firstEnd + 2 >= text.length) return 0;
  let n = 1;
  for (let at = text.indexOf("\r\n", firstEnd + 2); at >= 0; at = text.indexOf("\r\n", at + 2)) n++;
  return n;
}

/**
 * The head the fields' reading (`seen`) and the request line made: the
 * rules that read several fields together (one Host, the body's framing,
 * Connection, Expect), the same for a head read from its text (above) and
 * one read from its bytes (request-head-bytes.ts).
 */
export function headFrom(seen: RequestFields, method: string, target: string, sent: string, authority: string | undefined, minor: 0 | 1, whole: boolean): RequestHead | HeadRefusal {
  const { kept, names, hosts, host, lengths, codings, connection, upgradeField, expect } = seen;
  // exactly one Host in HTTP/1.1 (RFC 9112 §3.2): two could route the request two ways
  if (hosts > 1) return refuse(400, "The request has more than one Host header.");
  if (hosts === 0 && minor === 1 && authority === undefined) return refuse(400, "The Host header is missing.");

  let framing: RequestFraming = "none";
  let length = 0;
  if (codings) {
    if (minor === 0) return refuse(400, "Transfer-Encoding is not HTTP/1.0.");
    if (lengths) return refuse(400, "The request has both Transfer-Encoding and Content-Length.");
    if (codings.some((c) => !TOKEN.test(c))) return refuse(400, "The Transfer-Encoding header is malformed.");
    // the body's end is known only when chunked is the last coding (RFC 9112 §6.3)
    if (codings[codings.length - 1] !== "chunked" || codings.indexOf("chunked") !== codings.length - 1) {
      return refuse(codings.includes("chunked") ? 400 : 501, "Only a chunked Transfer-Encoding is understood.");
    }
    framing = "chunked";
  } else if (lengths) {
    const first = lengths[0]!;
    if (!DIGITS.test(first) || lengths.some((v) => v !== first)) return refuse(400, "The Content-Length header is malformed.");
    length = Number(first);
    if (length > 0) framing = "length";
  }

  const keepAlive = minor === 1 ? !listHas(connection, "close") : listHas(connection, "keep-alive");
  let expectContinue = false;
  if (expect !== undefined) {
    // 100-continue is the only expectation there is (RFC 9110 §10.1.1)
    if (expect.split(",").some((e) => e.trim() !== "100-continue")) return refuse(417, "Only Expect: 100-continue is understood.");
    expectContinue = minor === 1;
  }
  const upgrade = upgradeField !== undefined && listHas(connection, "upgrade") ? upgradeField : undefined;
  return { method, target, targetAsSent: target === sent, absolute: authority !== undefined, minor, fields: kept, names, whole, host: authority ?? host, framing, length, keepAlive, expectContinue, upgrade };
}

/** Every field in order, gathered for everyField (only when someone needs them all, so a new one each time is fine). */
class EveryField {
  readonly fields: [string, string][] = [];
  readonly names: string[] = [];

  field(name: string, lower: string, value: string): void {
    this.fields.push([name, value]);
    this.names.push(lower);
  }
}

/**
 * `head` with every field in `fields` and `names`: a head parsed for some of
 * its fields (the edge's, the agent's, which read few of them) has the rest
 * read from `text`, the text it was parsed from, the first time a reader
 * needs them all (the access rules, a head written anew, a switch's check)
 * and kept on it, so no head is read whole twice. Only its header lines are
 * read again: everything else was read, and checked, by its parse.
 */
export function everyField(head: RequestHead, text: string): RequestHead {
  if (head.whole) return head;
  const firstEnd = text.indexOf("\r\n");
  const every = new EveryField();
  // the head parsed within its limits: no count or name can fault now
  if (firstEnd >= 0) readFields(text, firstEnd + 2, Number.MAX_SAFE_INTEGER, MAX_NAME_LENGTH, every);
  head.fields = every.fields;
  head.names = every.names;
  head.whole = true;
  return head;
}

export const isRefusal = (x: RequestHead | HeadRefusal): x is HeadRefusal => "status" in x;
