/**
 * `burrow http`: an http tunnel's command, its flags and its help.
 */
import type { FlagTable } from "../../config/flags.ts";
import { HTTP_ACCESS_FLAGS } from "../access-flags.ts";
import { AGENT_GROUP, COMMON, POOL_FLAGS, PRIVATE_FLAGS, SUBDOMAIN_FLAG } from "../agent-flags.ts";
import { UPSTREAM_H2_FLAGS } from "../upstream-h2-flags.ts";
import type { CommandDoc } from "../usage.ts";
import type { CliKind } from "./unit.ts";

export const HTTP_FLAGS = {
  ...COMMON,
  ...SUBDOMAIN_FLAG,
  ...POOL_FLAGS,
  ...PRIVATE_FLAGS,
  "skip-warning": {
    type: "boolean",
    help: "no browser warning page (if your account allows it)",
    details: "Only if the user's `skip_warning` is true.",
  },
  "host-header": {
    type: "string",
    arg: "H",
    defaultText: "the visitor's Host",
    help: "'rewrite' sends the local address as Host; any other value is sent as is",
  },
  "upstream-protocol": {
    type: "string",
    arg: "P",
    defaultText: "http1",
    help: "how the agent speaks to your service: http1, h2c (HTTP/2 without TLS, e.g. a gRPC server) or h2 (HTTP/2 over TLS, for an https:// service)",
    details:
      "With h2c or h2 the agent keeps one HTTP/2 connection to each service and sends every request on it as a stream; visitors still reach the tunnel over HTTP/1.1 (or HTTP/2), and the service's answers, trailers such as grpc-status included, come back to them. A WebSocket's request goes over HTTP/1.1, and a pool member's --health-check must be tcp. It applies to the --route services too, and so do the --upstream-h2-* limits of that connection.",
  },
  route: {
    type: "string",
    arg: "PATH=ADDR",
    multiple: true,
    help: "send requests under PATH to another local service (PORT, HOST:PORT or URL), e.g. /api=8080",
    details:
      "Repeat it for more. The longest matching path wins, whole segments only (/api takes /api and /api/v1, not /apis); the path goes on unchanged, WebSocket upgrades included; the rest goes to the tunnel's own address. At most 64.",
  },
  "allow-upgrade": {
    type: "string",
    arg: "TOKEN",
    multiple: true,
    defaultText: "websocket only",
    help: "let requests switch to this protocol too (an Upgrade token such as h2c); the bytes after the switch are not judged",
    details:
      "A WebSocket needs no flag. Any other Upgrade is taken off the request, which reaches your service as a plain request. After a switch the connection is a pipe: no route, access rule or header rule reads what follows. At most 16.",
  },
  "response-timeout": {
    type: "string",
    arg: "S",
    defaultText: "the server's --response-timeout",
    help: "how long the edge waits for your service's answer before its 502 page, up to the server's --max-response-timeout",
    details: "Its response head, that is; for a slow but healthy service (long polls, reports). The page says \"took too long\".",
  },
  ...UPSTREAM_H2_FLAGS,
  ...HTTP_ACCESS_FLAGS,
} as const satisfies FlagTable;

const HTTP_DOC: CommandDoc = {
  name: "http",
  usage: ["burrow http PORT|HOST:PORT|URL [flags]"],
  about: `Exposes a local HTTP service (e.g. 3000, localhost:3000, https://localhost:8443)
at http://<subdomain>.<server domain>. Lost connections are retried for ever.`,
  flags: HTTP_FLAGS,
  groups: [
    { title: "Flags:", flags: ["subdomain", "hostname", "skip-warning", "host-header", "upstream-protocol", "route", "allow-upgrade", "response-timeout"] },
    { title: "HTTP/2 to the service (with --upstream-protocol h2c or h2):", flags: Object.keys(UPSTREAM_H2_FLAGS) },
    { title: "Several agents behind one name:", flags: Object.keys(POOL_FLAGS) },
    { title: "Who may reach it (enforced by the server):", flags: Object.keys(HTTP_ACCESS_FLAGS) },
    { title: "Private, for named users only (each request says who in X-Burrow-User):", flags: Object.keys(PRIVATE_FLAGS) },
    AGENT_GROUP,
  ],
};

export const HTTP_COMMAND: CliKind = { doc: HTTP_DOC };
