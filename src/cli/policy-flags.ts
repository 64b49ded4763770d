/** `burrow policy check` and `burrow policy test`: their flags and help. */
import type { FlagTable } from "../config/flags.ts";
import type { CommandDoc } from "./usage.ts";

const JSON_FLAG = { json: { type: "boolean", help: "print the result as JSON, for scripts" } } as const satisfies FlagTable;

export const POLICY_CHECK_FLAGS = { ...JSON_FLAG } as const satisfies FlagTable;

export const POLICY_TEST_FLAGS = {
  request: { type: "string", arg: "'METHOD PATH'", required: true, help: "the method and path to try, such as GET /api/users?id=1" },
  header: { type: "string", arg: "'NAME: VALUE'", multiple: true, help: "a request header" },
  "client-ip": { type: "string", arg: "IP", default: "203.0.113.10", help: "the visitor's address" },
  host: { type: "string", arg: "HOST", default: "app.tunnels.example.com", help: "the Host the request is sent to (the tunnel's name)" },
  body: { type: "string", arg: "TEXT", help: "the request's body (what verify-webhook checks)" },
  status: {
    type: "string",
    arg: "N",
    help: "also run on_http_response, as if the service answered N",
    details: "Without it only `on_tcp_connect` and `on_http_request` run.",
  },
  "response-header": { type: "string", arg: "'NAME: VALUE'", multiple: true, help: "a header of that answer" },
  event: {
    type: "string",
    arg: "TEXT",
    multiple: true,
    help: "an event of that answer's stream (with --status), its lines apart by newlines or \\n",
    details: "Each is run through on_event_stream_message's rewrites and printed as the visitor would get it. Without a Content-Type from --response-header, the answer is text/event-stream.",
  },
  ...JSON_FLAG,
} as const satisfies FlagTable;

export const POLICY_CHECK_DOC: CommandDoc = {
  name: "policy check",
  usage: ["burrow policy check FILE [--json]"],
  about: `Checks a traffic policy (YAML or JSON) without running anything: every
expression parsed and type-checked, every action and its config, every cap.
Exit 0 with "FILE: ok" and its rules per phase, or exit 1 with each error as
FILE:LINE:COLUMN: why (rule) [CODE], a CEL error with its expression and a
caret under its column.`,
  flags: POLICY_CHECK_FLAGS,
};

export const POLICY_TEST_DOC: CommandDoc = {
  name: "policy test",
  usage: ["burrow policy test FILE --request 'METHOD PATH' [--header 'K: V']... [flags]"],
  about: `Runs a traffic policy on one made-up request, offline: on_tcp_connect, then
on_http_request (and on_http_response with --status, then
on_event_stream_message on each --event), printing each rule
that matched, what each of its actions did, and what the edge would do:
answer (status, headers, body), close the connection, or forward the request
(as the actions left it) to the service. Exit 0 when the policy ran, 1 when
it does not load (its errors, as policy check prints them).`,
  flags: POLICY_TEST_FLAGS,
  after: `Rate limits count within the one run; jwt-validation fetches its JWKS URLs;
openid-connect answers 503, since the sign-in is the edge's.`,
};

export const POLICY_DOC: CommandDoc = {
  name: "policy",
  usage: ["burrow policy check FILE", "burrow policy test FILE --request 'METHOD PATH' [flags]"],
  about: "Checks a traffic policy, or tries it on a request (docs/policy.md).",
  flags: {},
};
