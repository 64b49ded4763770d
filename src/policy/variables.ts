/**
 * The variables a policy's expressions may read, with ngrok's names where
 * ngrok has them (a policy written for ngrok reads the same), burrow's own
 * beside them, their CEL types, and the phases that have them. The type
 * checker refuses at load a name that is not here, or one its phase does
 * not have (`res.status_code` in `on_http_request`); context.ts gives each
 * its value per request, computed only when an expression reads it.
 *
 * Names with dots are CEL qualified names: `req.url` is a string and
 * `req.url.path` another variable, as ngrok has them.
 */
import { CelScalar, listType, mapType, objectType, type CelType } from "@bufbuild/cel";
import { TimestampSchema } from "@bufbuild/protobuf/wkt";

export const PHASES = ["on_tcp_connect", "on_http_request", "on_http_response", "on_event_stream_message"] as const;
export type Phase = (typeof PHASES)[number];

const { STRING, INT, BOOL, DYN } = CelScalar;
export const TIMESTAMP_TYPE = objectType(TimestampSchema);
const STRINGS = listType(STRING);
const MULTI_MAP = mapType(STRING, STRINGS);

export interface VariableDoc {
  type: CelType;
  /** The phases that have it. */
  phases: readonly Phase[];
  /** What it is, for docs/policy.md and `policy test`'s help. */
  about: string;
}

const ALL: readonly Phase[] = PHASES;
const HTTP: readonly Phase[] = ["on_http_request", "on_http_response", "on_event_stream_message"];
// on_event_stream_message's rules are judged once, on the response's head, as on_http_response's (sse-find-replace.ts)
const RESPONSE: readonly Phase[] = ["on_http_response", "on_event_stream_message"];

export const VARIABLES: Readonly<Record<string, VariableDoc>> = {
  "conn.client_ip": { type: STRING, phases: ALL, about: "the visitor's address (behind a trusted proxy, the client it names)" },
  "conn.client_port": { type: INT, phases: ALL, about: "the visitor's source port" },
  "conn.server_ip": { type: STRING, phases: ALL, about: "the address the visitor connected to (empty where it is not known: a request relayed from another node)" },
  "conn.server_port": { type: INT, phases: ALL, about: "the port the visitor connected to" },
  "conn.server_region": { type: STRING, phases: ALL, about: "the region of the node the visitor's connection came in at (`--region`; a request or connection relayed from another node: that node's), empty when it has none" },
  "conn.bytes_in": { type: INT, phases: ALL, about: "the bytes that came from the visitor on this connection so far (after TLS is taken off, for https; for a tcp or tls tunnel, those passed on to the agent: 0 at on_tcp_connect)" },
  "conn.bytes_out": { type: INT, phases: ALL, about: "the bytes that went to the visitor on this connection so far (before TLS, for https)" },
  "conn.tls.version": { type: STRING, phases: ALL, about: "the TLS version the visitor's connection negotiated with the edge, as ngrok writes it: `1.3`, `1.2` (empty without TLS)" },
  "conn.tls.cipher_suite": { type: STRING, phases: ALL, about: "the cipher suite of that handshake, by its IANA name: `TLS_AES_128_GCM_SHA256` (empty without TLS)" },
  "conn.tls.sni": { type: STRING, phases: ALL, about: "the server name the visitor's ClientHello asked for, a tls tunnel's too (empty without TLS)" },
  "conn.tls.negotiated_alpn": { type: STRING, phases: ALL, about: "the protocol ALPN agreed on in that handshake: `h2`, `http/1.1` (empty without TLS, or when the visitor offered none)" },
  "conn.tls.session_resumed": { type: BOOL, phases: ALL, about: "whether that handshake resumed an earlier session (false without TLS)" },
  "conn.tls.ja4_fingerprint": { type: STRING, phases: ALL, about: "the JA4 fingerprint of the visitor's ClientHello, a tls tunnel's too: `t13d1516h2_8daaf6152771_e5627efa2ab1` (empty without TLS)" },
  "conn.geo.city": { type: STRING, phases: ALL, about: "the city, in English, the visitor's address likely comes from (from the server's GeoIP database, --geoip-db; empty where it does not know the address)" },
  "conn.geo.country": { type: STRING, phases: ALL, about: "the country's name, in English, the visitor's address likely comes from (empty where unknown)" },
  "conn.geo.country_code": { type: STRING, phases: ALL, about: "that country's two-letter ISO 3166-1 code: `US`, `DE` (empty where unknown)" },
  "conn.geo.latitude": { type: STRING, phases: ALL, about: "the approximate latitude, as text as ngrok has it: `double(conn.geo.latitude)` (empty where unknown)" },
  "conn.geo.longitude": { type: STRING, phases: ALL, about: "the approximate longitude, as text (empty where unknown)" },
  "conn.geo.radius": { type: STRING, phases: ALL, about: "the radius in kilometres around latitude and longitude the address likely comes from, as text (empty where unknown)" },
  "conn.geo.subdivision": { type: STRING, phases: ALL, about: "the first subdivision's name, in English: a state, a province (empty where unknown)" },
  "conn.ts.start": { type: TIMESTAMP_TYPE, phases: ALL, about: "when the visitor's connection opened" },
  "endpoint.id": { type: STRING, phases: ALL, about: "the tunnel's id, the same for its whole life" },
  "endpoint.addr": { type: STRING, phases: ALL, about: "the tunnel's public address: `host:port`" },
  "endpoint.host": { type: STRING, phases: ALL, about: "the tunnel's public host name (for tcp, the server's domain; for tls, the tunnel's whole name)" },
  "endpoint.port": { type: INT, phases: ALL, about: "the tunnel's public port" },
  "endpoint.protocol": { type: STRING, phases: ALL, about: "`http`, `https`, `tcp` or `tls`" },
  "endpoint.url": { type: STRING, phases: ALL, about: "the tunnel's public URL" },
  "tunnel.name": { type: STRING, phases: ALL, about: "the tunnel's name (its subdomain, or its name in burrow.yml)" },
  "tunnel.kind": { type: STRING, phases: ALL, about: "`http`, `tcp`, `tls` or `udp`" },
  "user.name": { type: STRING, phases: ALL, about: "the username of the tunnel's owner" },
  "time.now": { type: STRING, phases: ALL, about: "now, in UTC, as RFC 3339 text" },
  "req.method": { type: STRING, phases: HTTP, about: "the request's method" },
  "req.version": { type: STRING, phases: HTTP, about: "the HTTP version as ngrok writes it: `HTTP/1.1`, `HTTP/1.0`, `HTTP/2.0`" },
  "req.url": { type: STRING, phases: HTTP, about: "the full URL: scheme, host, path and query" },
  "req.url.scheme": { type: STRING, phases: HTTP, about: "`http` or `https`" },
  "req.url.host": { type: STRING, phases: HTTP, about: "the host, without the port" },
  "req.url.port": { type: INT, phases: HTTP, about: "the port the Host names (absent: the scheme's)" },
  "req.url.authority": { type: STRING, phases: HTTP, about: "host and port as the Host header has them" },
  "req.url.path": { type: STRING, phases: HTTP, about: "the path, in its normal form, with its leading slash" },
  "req.url.raw_path": { type: STRING, phases: HTTP, about: "the path as sent" },
  "req.url.query": { type: STRING, phases: HTTP, about: "the query string, without the `?`" },
  "req.url.uri": { type: STRING, phases: HTTP, about: "path and query" },
  "req.url.raw": { type: STRING, phases: HTTP, about: "the URL with the path as sent" },
  "req.url.user_password": { type: STRING, phases: HTTP, about: "the URL's `user:password` part: always empty, as the edge refuses a request whose target carries one" },
  "req.url.query_params": { type: MULTI_MAP, phases: HTTP, about: "the query parameters: name to its values" },
  "req.query_params": { type: MULTI_MAP, phases: HTTP, about: "the same as `req.url.query_params`" },
  "req.headers": { type: MULTI_MAP, phases: HTTP, about: "the request's headers: lower-case name to its values (looked up in any case)" },
  "req.host": { type: STRING, phases: HTTP, about: "the Host header" },
  "req.user_agent": { type: STRING, phases: HTTP, about: "the User-Agent header" },
  "req.content_type": { type: STRING, phases: HTTP, about: "the Content-Type's media type, without parameters" },
  "req.content_type.raw": { type: STRING, phases: HTTP, about: "the Content-Type header as sent" },
  "req.content_type.parameters": { type: mapType(STRING, STRING), phases: HTTP, about: "the Content-Type's parameters: lower-case name to value (`charset`)" },
  "req.content_encoding": { type: STRINGS, phases: HTTP, about: "the Content-Encoding's codings" },
  "req.location": { type: STRING, phases: HTTP, about: "the request's Location header (ngrok has it)" },
  "req.content_length": { type: INT, phases: HTTP, about: "the Content-Length, -1 when the request has none" },
  "req.cookies": { type: mapType(STRING, listType(mapType(STRING, STRING))), phases: HTTP, about: "the cookies: name to a list of `{name, value}`" },
  "req.ts.header_received": { type: TIMESTAMP_TYPE, phases: HTTP, about: "when the request's head was read" },
  "res.status_code": { type: INT, phases: RESPONSE, about: "the response's status code" },
  "res.headers": { type: MULTI_MAP, phases: RESPONSE, about: "the response's headers: lower-case name to its values (looked up in any case)" },
  "res.cookies": { type: mapType(STRING, listType(mapType(STRING, DYN))), phases: RESPONSE, about: "the Set-Cookie cookies: name to a list of ngrok's cookie struct (`name`, `value`, `path`, `domain`, `expires`, `max_age`, `secure`, `http_only`, `same_site`, `unparsed_attributes`), the longest path first" },
  "res.content_type": { type: STRING, phases: RESPONSE, about: "the Content-Type's media type, without parameters" },
  "res.content_type.raw": { type: STRING, phases: RESPONSE, about: "the Content-Type header as sent" },
  "res.content_type.parameters": { type: mapType(STRING, STRING), phases: RESPONSE, about: "the Content-Type's parameters: lower-case name to value" },
  "res.content_length": { type: INT, phases: RESPONSE, about: "the Content-Length, -1 when the response has none" },
  "res.content_encoding": { type: STRINGS, phases: RESPONSE, about: "the Content-Encoding's codings" },
  "res.location": { type: STRING, phases: RESPONSE, about: "the Location header" },
  "visitor.identity": { type: STRING, phases: HTTP, about: "who an authentication action let in (the basic-auth user, the JWT's `sub`, the signed-in email); empty before" },
  vars: { type: mapType(STRING, DYN), phases: ALL, about: "what the set-vars actions before set in this phase of this policy: `vars.<name>` (one never set is an error: the rule does not match)" },
  "actions": { type: DYN, phases: ALL, about: "what the actions that ran set, under ngrok's names: `actions.ngrok.rate_limit.limited`, ..." },
};

/** The variables of one phase, as the CEL environment declares them. */
export function phaseVariables(phase: Phase): Record<string, CelType> {
  const out: Record<string, CelType> = {};
  for (const [name, v] of Object.entries(VARIABLES)) if (v.phases.includes(phase)) out[name] = v.type;
  return out;
}

/** The phase names a variable is read in, for the error when another phase uses it. */
export function phasesOf(name: string): readonly Phase[] | undefined {
  return VARIABLES[name]?.phases;
}

