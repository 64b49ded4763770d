/**
 * A response's header block as HTTP/2 says it must be (RFC 9113 §8.1-8.3),
 * read field by field as HPACK decodes it, for the client connection:
 * :status first and once, a status code and no other pseudo-header field;
 * names in lower case and tokens; no connection-specific field; and values
 * that an HTTP/1.1 head can carry as they are: no control character but
 * HTAB, no whitespace at either end. A trailer section has no pseudo-header
 * field at all. A block that breaks one is malformed: the stream is reset,
 * never guessed at. These checks are what keeps the HTTP/1.1 head made from
 * a response (an agent's translation) to the fields the service sent: a CR
 * or LF let through here would be a header line of the service's choosing
 * there.
 *
 * The sink never throws: HPACK must read the whole block whatever it says
 * (the dynamic table), so a fault is noted and the rest ignored.
 */
import type { FieldSink } from "./hpack-decoder.ts";
import { validName } from "./request-fields.ts";

/** Fields that describe one HTTP/1.1 connection, which an HTTP/2 response must not carry (RFC 9113 §8.2.2). */
const CONNECTION_SPECIFIC: ReadonlySet<string> = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te"]);
const STATUS = /^[1-5][0-9][0-9]$/;
const DIGITS = /^[0-9]{1,15}$/;

/** A value an HTTP/1.1 field line takes as it is: HTAB, visible ASCII, SP and obs-text, with no whitespace at either end. */
export function fieldValueFits(value: string): boolean {
  const n = value.length;
  if (n === 0) return true;
  const first = value.charCodeAt(0);
  const last = value.charCodeAt(n - 1);
  if (first === 0x20 || first === 0x09 || last === 0x20 || last === 0x09) return false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if ((c < 0x20 && c !== 0x09) || c === 0x7f || c > 0xff) return false;
  }
  return true;
}

/** Reads a response's fields (or, `trailers`, a trailer section's) and says what is wrong with them, if anything. */
export class ResponseFields implements FieldSink {
  /** :status; 0 while none came. */
  status = 0;
  /** The other fields in order, names in lower case. */
  fields: [string, string][] = [];
  /** Content-Length, or -1 when none was sent. */
  contentLength = -1;
  /** Why the block is malformed (the first fault); undefined while it is not. */
  fault: string | undefined;
  private regularSeen = false;

  constructor(private readonly trailers = false) {}

  field(name: string, value: string): void {
    if (this.fault !== undefined) return;
    if (name.charCodeAt(0) === 0x3a /* : */) return this.pseudo(name, value);
    this.regularSeen = true;
    if (!validName(name)) return this.malformed("a field name that is not a lower-case token");
    if (!fieldValueFits(value)) return this.malformed(`a value of ${name} with a control character or whitespace at an end`);
    if (CONNECTION_SPECIFIC.has(name)) return this.malformed(`the connection-specific field ${name}`);
    if (name === "content-length") {
      if (!DIGITS.test(value)) return this.malformed("a malformed content-length");
      const length = Number(value);
      if (this.contentLength !== -1 && this.contentLength !== length) return this.malformed("content-lengths that disagree");
      this.contentLength = length;
    }
    this.fields.push([name, value]);
  }

  private pseudo(name: string, value: string): void {
    if (this.trailers) return this.malformed("a pseudo-header field in trailers");
    if (this.regularSeen) return this.malformed(`${name.slice(0, 40)} after a regular field`);
    if (name !== ":status") return this.malformed(`the pseudo-header field ${name.slice(0, 40)} in a response`);
    if (this.status !== 0) return this.malformed("two :status");
    // 101 has no meaning in HTTP/2 (no protocol switch), RFC 9113 §8.6
    if (!STATUS.test(value) || value === "101") return this.malformed("a :status that is not a status code");
    this.status = Number(value);
  }

  /** The whole block is read: what a response needs and it lacks. */
  finish(): void {
    if (this.fault !== undefined || this.trailers) return;
    if (this.status === 0) this.malformed("no :status");
  }

  private malformed(why: string): void {
    this.fault = why;
  }
}
