/**
 * A request's header block as HTTP/2 says it must be (RFC 9113 §8.1-8.3),
 * read field by field as HPACK decodes it: pseudo-header fields first, each
 * known and once; names in lower case and without separators; values
 * without NUL, CR or LF and without whitespace at either end; no
 * connection-specific field (Connection, Keep-Alive, Proxy-Connection,
 * Transfer-Encoding, Upgrade, a TE other than "trailers"); :method, and
 * :scheme and :path unless it is CONNECT; a Host that agrees with
 * :authority. A request that breaks one is malformed: a stream error,
 * never a guess. These checks are also what keeps the HTTP/1.1 request made
 * from it (http1.ts) to the one request it was: a CR or LF let through here
 * would be a header line of the attacker's choosing there.
 *
 * The sink never throws: HPACK must read the whole block whatever it says
 * (the dynamic table), so a fault is noted and the rest ignored.
 */
import type { FieldSink } from "./hpack-decoder.ts";

/** A request as its stream's HEADERS gave it. */
export interface H2Request {
  method: string;
  /** "http" or "https"; undefined for CONNECT. */
  scheme: string | undefined;
  /** :authority, or undefined when the client sent none (then a Host field may name the host). */
  authority: string | undefined;
  /** :path as sent (origin form, or "*"); undefined for CONNECT. */
  path: string | undefined;
  /** The other fields in order, names in lower case (cookie crumbs kept apart, as sent). */
  fields: [string, string][];
  /** Content-Length, or -1 when none was sent. */
  contentLength: number;
}

/** Characters of a field name (a token, lower case): RFC 9110 §5.1 with RFC 9113 §8.2.1's lower case. */
const NAME_CHAR = new Uint8Array(128);
for (const c of "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz") NAME_CHAR[c.charCodeAt(0)] = 1;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const SCHEME = /^https?$/;
const DIGITS = /^[0-9]{1,15}$/;
/** Visible ASCII: what a request target or an authority may hold (the HTTP/1.1 request line takes no more). */
const VISIBLE = /^[\x21-\x7e]+$/;

/** Fields that describe one HTTP/1.1 connection: a request carrying one is malformed (RFC 9113 §8.2.2). */
const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade"]);

export function validName(name: string): boolean {
  if (name.length === 0) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c >= 128 || NAME_CHAR[c] === 0) return false;
  }
  return true;
}

/** No NUL, CR or LF anywhere; no SP or HTAB at either end (RFC 9113 §8.2.1). */
export function validValue(value: string): boolean {
  const n = value.length;
  if (n === 0) return true;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (c === 0 || c === 0x0a || c === 0x0d) return false;
  }
  return true;
}

/** Reads a request's fields (or, `trailers`, a trailer section's) and says what is wrong with them, if anything. */
export class RequestFields implements FieldSink {
  method: string | undefined;
  scheme: string | undefined;
  authority: string | undefined;
  path: string | undefined;
  fields: [string, string][] = [];
  contentLength = -1;
  /** Why the block is malformed (the first fault); undefined while it is not. */
  fault: string | undefined;
  private regularSeen = false;
  private hosts: string[] | undefined;

  constructor(private readonly trailers = false) {}

  field(name: string, value: string): void {
    if (this.fault !== undefined) return;
    if (name.charCodeAt(0) === 0x3a /* : */) return this.pseudo(name, value);
    this.regularSeen = true;
    if (!validName(name)) return this.malformed("a field name that is not a lower-case token");
    if (!validValue(value)) return this.malformed(`a value of ${name} with NUL, CR, LF or whitespace at an end`);
    if (CONNECTION_SPECIFIC.has(name)) return this.malformed(`the connection-specific field ${name}`);
    if (name === "te" && value !== "trailers") return this.malformed("TE other than trailers");
    if (name === "content-length") {
      if (!DIGITS.test(value)) return this.malformed("a malformed content-length");
      const length = Number(value);
      if (this.contentLength !== -1 && this.contentLength !== length) return this.malformed("content-lengths that disagree");
      this.contentLength = length;
    } else if (name === "host") {
      (this.hosts ??= []).push(value);
    }
    this.fields.push([name, value]);
  }

  private pseudo(name: string, value: string): void {
    if (this.trailers) return this.malformed("a pseudo-header field in trailers");
    if (this.regularSeen) return this.malformed(`${name} after a regular field`);
    switch (name) {
      case ":method":
        if (this.method !== undefined) return this.malformed("two :method");
        if (!TOKEN.test(value)) return this.malformed("a malformed :method");
        this.method = value;
        return;
      case ":scheme":
        if (this.scheme !== undefined) return this.malformed("two :scheme");
        if (!SCHEME.test(value)) return this.malformed("a :scheme other than http or https");
        this.scheme = value;
        return;
      case ":authority":
        if (this.authority !== undefined) return this.malformed("two :authority");
        // no userinfo for http(s) (RFC 9113 §8.3.1); what the Host line may carry and no more
        if (!VISIBLE.test(value) || value.includes("@")) return this.malformed("a malformed :authority");
        this.authority = value;
        return;
      case ":path":
        if (this.path !== undefined) return this.malformed("two :path");
        if (!VISIBLE.test(value) || (value.charCodeAt(0) !== 0x2f && value !== "*")) return this.malformed("a malformed :path");
        this.path = value;
        return;
      default:
        return this.malformed(`the pseudo-header field ${name.slice(0, 40)}`);
    }
  }

  /** The whole block is read: what a request needs and it lacks. */
  finish(): void {
    if (this.fault !== undefined || this.trailers) return;
    if (this.method === undefined) return this.malformed("no :method");
    if (this.method === "CONNECT") {
      if (this.authority === undefined || this.scheme !== undefined || this.path !== undefined) return this.malformed("CONNECT without :authority alone");
    } else if (this.scheme === undefined || this.path === undefined) return this.malformed("no :scheme or :path");
    else if (this.path === "*" && this.method !== "OPTIONS") return this.malformed(":path * for a method other than OPTIONS");
    // a Host beside :authority must name the same (RFC 9113 §8.3.1): two could route the request two ways
    if (this.hosts && this.authority !== undefined) {
      const authority = this.authority.toLowerCase();
      if (this.hosts.some((h) => h.toLowerCase() !== authority)) return this.malformed("a Host that differs from :authority");
    }
  }

  request(): H2Request {
    return { method: this.method!, scheme: this.scheme, authority: this.authority, path: this.path, fields: this.fields, contentLength: this.contentLength };
  }

  private malformed(why: string): void {
    this.fault = why;
  }
}
