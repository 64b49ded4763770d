/**
 * An HTTP/2 exchange as the HTTP/1.1 one a tunnel carries: what reaches an
 * agent stays an HTTP/1.1 request on a stream, and its HTTP/1.1 response
 * comes back as HTTP/2 response fields.
 *
 * A request becomes a request line (:method, :path) and a Host (from
 * :authority), its fields after, the cookie crumbs joined into one field
 * (RFC 9113 §8.2.3) and TE left out (it says what this hop takes); a body
 * without a Content-Length is sent chunked. The text is then parsed by the
 * same parser as a visitor's HTTP/1.1 head (http/request-head.ts), so an h2
 * request meets every rule an HTTP/1.1 one meets, in one place: the path
 * made normal, the refusals with their status.
 */
import { isRefusal, parseRequestHead, type HeadRefusal, type RequestHead } from "../http/request-head.ts";
import { replyHeaders, type ParsedHead } from "../http/response-head.ts";
import type { H2Request } from "./request-fields.ts";

/**
 * The HTTP/1.1 head of `req`, without the blank line that ends it (as a
 * visitor's head is read: the bytes sent are the text and "\r\n\r\n").
 * `bodyFollows`: the stream's HEADERS did not end it.
 */
export function http1HeadText(req: H2Request, bodyFollows: boolean): string {
  const target = req.method === "CONNECT" ? req.authority! : req.path!;
  let text = `${req.method} ${target} HTTP/1.1`;
  const fromAuthority = req.authority !== undefined;
  if (fromAuthority) text += `\r\nhost: ${req.authority}`;
  let cookie: string | undefined;
  let cookieAt = -1;
  for (const [name, value] of req.fields) {
    if (name === "cookie") {
      cookie = cookie === undefined ? value : `${cookie}; ${value}`;
      if (cookieAt < 0) cookieAt = text.length;
      continue;
    }
    // the Host :authority agrees with (checked) is said once; TE is this hop's
    if ((name === "host" && fromAuthority) || name === "te") continue;
    text += `\r\n${name}: ${value}`;
  }
  // the joined cookie goes where its first crumb was
  if (cookie !== undefined) text = `${text.slice(0, cookieAt)}\r\ncookie: ${cookie}${text.slice(cookieAt)}`;
  if (bodyFollows && req.contentLength < 0) text += "\r\ntransfer-encoding: chunked";
  return text;
}

export interface Http1Request {
  /** The head's text, without its blank line. */
  text: string;
  /** The head as the edge reads a visitor's (its `framing` says how the body is sent: chunked when the client gave no length). */
  head: RequestHead;
}

/**
 * `req` as an HTTP/1.1 request, parsed as a visitor's head is: `fields`
 * and `maxFields` as parseRequestHead takes them. A refusal (a path that is
 * not normal, CONNECT, too many fields...) is the status to answer the
 * stream with.
 */
export function http1Request(req: H2Request, bodyFollows: boolean, fields: boolean | ReadonlySet<number> = true, maxFields?: number): Http1Request | HeadRefusal {
  const text = http1HeadText(req, bodyFollows);
  const head = parseRequestHead(text, fields, maxFields);
  if (isRefusal(head)) return head;
  return { text, head };
}

/** Whether http1Request refused. */
export const isHttp1Refusal = (r: Http1Request | HeadRefusal): r is HeadRefusal => "status" in r;

export interface H2Response {
  status: number;
  /** Lower-case names, without connection-specific fields. */
  fields: [string, string][];
}

/**
 * An HTTP/1.1 response head as HTTP/2 response fields: the status, and the
 * fields without those that describe the HTTP/1.1 connection (Connection
 * and what it names, Keep-Alive, Transfer-Encoding, Upgrade...: a response
 * carrying one is malformed in HTTP/2, RFC 9113 §8.2.2), Content-Length
 * kept only where it describes the body. A 101 cannot be carried: HTTP/2
 * has no protocol switch (an error string, as parseHead's).
 */
export function h2Response(head: ParsedHead): H2Response | string {
  if (head.status === 101) return "a 101 (protocol switch) cannot be sent on an HTTP/2 stream";
  return { status: head.status, fields: replyHeaders(head) };
}
