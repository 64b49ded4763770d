/**
 * A visitor's request as the HTTP/2 request a service that speaks h2 gets
 * (RFC 9113 §8.3): the request line and Host become :method, :scheme,
 * :authority and :path, and the fields that describe the HTTP/1.1
 * connection are left out (Connection and the fields it names, Keep-Alive,
 * Proxy-Connection, Transfer-Encoding, Upgrade, HTTP2-Settings; a request
 * carrying one is malformed in HTTP/2), names in lower case. TE is this
 * hop's: the agent reads trailers (it passes them on as HTTP/1.1's chunked
 * trailer fields), so it says `te: trailers`, which a gRPC service requires.
 * The body goes as DATA, without its HTTP/1.1 framing; a Content-Length
 * stays, as the length the body has.
 */
import { everyField } from "../../http/request-head.ts";
import type { Fields } from "../../http2/client-stream.ts";
import type { LocalRequest } from "./request.ts";

/** Fields HTTP/2 has no place for: they describe an HTTP/1.1 connection (or are the pseudo-header fields' own). */
const LEFT_OUT: ReadonlySet<string> = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "host", "http2-settings"]);

/**
 * The HTTP/2 request head of `request` (pseudo-header fields first), or why
 * it has none. `scheme`: https over TLS; `authority`: the service's address,
 * for a request that named no Host (HTTP/1.0).
 */
export function h2RequestFields(request: LocalRequest, scheme: "http" | "https", authority: string): Fields | string {
  const { head } = request;
  // a tunnel to a host:port through the service: HTTP/2 has its own CONNECT, which no service behind a tunnel expects
  if (head.method === "CONNECT") return "CONNECT cannot go to an HTTP/2 service";
  if (!head.whole) {
    const { bytes } = request;
    everyField(head, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength - 4).toString("latin1"));
  }
  const { fields: given, names } = head;
  let named: Set<string> | undefined;
  for (let i = 0; i < names.length; i++) {
    if (names[i] !== "connection") continue;
    for (const token of given[i]![1].split(",")) (named ??= new Set()).add(token.trim().toLowerCase());
  }
  const fields: [string, string][] = [
    [":method", head.method],
    [":scheme", scheme],
    [":authority", head.host || authority],
    [":path", head.target],
  ];
  for (let i = 0; i < names.length; i++) {
    const name = names[i]!;
    if (LEFT_OUT.has(name) || named?.has(name)) continue;
    fields.push([name, given[i]![1]]);
  }
  fields.push(["te", "trailers"]);
  return fields;
}
